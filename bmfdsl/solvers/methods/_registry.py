"""The classical methods by name: built-ins, then plug-ins from the group ``bmfdsl.methods``.

A plug-in's entry point names a function ``method(A, rank, *, random_state=None) -> (U, V)``
(``"package.module:function"``); it is imported on first use, like the built-ins.

>>> sorted(METHODS)
['baseline', 'penalized', 'thresholded']
>>> get_method("Thresholded") is METHODS["thresholded"]
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from bmfdsl.registry import Registry, import_target

MethodFunction = Callable[..., tuple[np.ndarray, np.ndarray]]

ENTRY_POINT_GROUP = "bmfdsl.methods"

_METHODS: Registry[str] = Registry(
    "method",
    ENTRY_POINT_GROUP,
    {
        "baseline": "bmfdsl.solvers.methods._baseline:baseline",
        "thresholded": "bmfdsl.solvers.methods._thresholded:thresholded",
        "penalized": "bmfdsl.solvers.methods._penalized:penalized",
    },
    str,
)


def get_method(name: Any) -> MethodFunction:
    """The method registered under ``name`` (case and ``-``/``_`` insensitive).

    >>> try:
    ...     get_method("simplex")
    ... except KeyError as error:
    ...     print(error)
    unknown method 'simplex'; known methods: 'baseline', 'penalized', 'thresholded'
    """
    _, target = _METHODS.get(name)
    method: MethodFunction = import_target(target)
    return method


class _MethodTable(Mapping[str, MethodFunction]):
    """Every registered method by normalised name; a method is imported when looked up."""

    def __getitem__(self, name: str) -> MethodFunction:
        return get_method(name)

    def __iter__(self) -> Iterator[str]:
        return iter(_METHODS.entries())

    def __len__(self) -> int:
        return len(_METHODS.entries())

    def __repr__(self) -> str:
        return f"METHODS({sorted(self)})"


#: Registered classical methods: name -> ``method(A, rank, *, random_state=None)``.
METHODS: Mapping[str, MethodFunction] = _MethodTable()

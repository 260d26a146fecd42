"""Classical BMF methods the paper compares against, by name.

Every method is called as ``method(A, rank, *, random_state=None) -> (U, V)`` with 0/1
``U`` (``m x r``) and ``V`` (``n x r``).

>>> sorted(METHODS)
['baseline', 'penalized', 'thresholded']
>>> get_method("Thresholded") is METHODS["thresholded"]
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from bmfdsl.errors import UnknownNameError
from bmfdsl.solvers.methods._baseline import baseline
from bmfdsl.solvers.methods._penalized import penalized
from bmfdsl.solvers.methods._thresholded import thresholded

__all__ = ["METHODS", "MethodFunction", "baseline", "get_method", "penalized", "thresholded"]

MethodFunction = Callable[..., tuple[np.ndarray, np.ndarray]]

#: Registered classical methods: name -> ``method(A, rank, *, random_state=None)``.
METHODS: dict[str, MethodFunction] = {
    "baseline": baseline,
    "thresholded": thresholded,
    "penalized": penalized,
}


def get_method(name: Any) -> MethodFunction:
    """The method registered under ``name`` (case and ``-``/``_`` insensitive).

    >>> try:
    ...     get_method("simplex")
    ... except KeyError as error:
    ...     print(error)
    unknown method 'simplex'; known methods: 'baseline', 'penalized', 'thresholded'
    """
    key = str(name).strip().lower().replace("_", "-") if isinstance(name, str) else None
    if key not in METHODS:
        raise UnknownNameError("method", name, METHODS)
    return METHODS[key]

"""Classical BMF methods the paper compares against, by name.

Every method is called as ``method(A, rank, *, random_state=None) -> (U, V)`` with 0/1
``U`` (``m x r``) and ``V`` (``n x r``). :data:`METHODS` and :func:`get_method` find them by
name (case and ``-``/``_`` insensitive); third parties add methods through the entry-point
group ``bmfdsl.methods`` (name -> ``"package.module:function"``). Nothing is imported until
a method is used.

>>> sorted(METHODS)
['baseline', 'penalized', 'thresholded']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bmfdsl._lazy import lazy_exports

if TYPE_CHECKING:
    from bmfdsl.solvers.methods._baseline import baseline
    from bmfdsl.solvers.methods._penalized import SPARSE_DENSITY, penalized
    from bmfdsl.solvers.methods._registry import METHODS, MethodFunction, get_method
    from bmfdsl.solvers.methods._thresholded import thresholded

__getattr__, __dir__, __all__ = lazy_exports(globals())

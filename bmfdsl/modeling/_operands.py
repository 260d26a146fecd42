"""What the symbolic arrays show numpy and the weights: shared by ``_expr`` and ``_weighted``.

* :class:`WeightedOperand` — the base of weight expressions, which :class:`PolyArray`
  arithmetic hands over to (their reflected operators keep the weights symbolic);
* :data:`UFUNC_OPERATORS` — the numpy ufuncs that are arithmetic on symbolic arrays (an
  ndarray on the left of ``+ - * @ <= >=``);
* :func:`refuse_numpy` — the error for any other numpy function, naming what to use instead.
"""

from __future__ import annotations

import numpy as np

from bmfdsl.errors import ModelDefinitionError


class WeightedOperand:
    """Base of the weight expressions (``mu``, ``mu * x``; :mod:`bmfdsl.modeling._weighted`):
    arithmetic of :class:`PolyArray` and :class:`Squares` hands them over to their reflected
    operators, which keep the weights symbolic."""

    __slots__ = ()


#: numpy ufuncs that are arithmetic on a PolyArray: (method, reflected method).
UFUNC_OPERATORS = {
    np.add: ("__add__", "__radd__"),
    np.subtract: ("__sub__", "__rsub__"),
    np.multiply: ("__mul__", "__rmul__"),
    np.matmul: ("__matmul__", "__rmatmul__"),
    np.less_equal: ("__le__", "__ge__"),
    np.greater_equal: ("__ge__", "__le__"),
}
#: What to write instead of a numpy function, by its name.
_NUMPY_INSTEAD = {
    "sum": "expr.sum(axis=...)",
    "transpose": "expr.T or expr.transpose(...)",
    "reshape": "expr.reshape(...)",
    "ravel": "expr.reshape(-1)",
    "broadcast_to": "expr.broadcast_to(shape)",
    "dot": "a @ b (or a.dot(b))",
    "matmul": "a @ b",
    "einsum": "bmfdsl.modeling.einsum(...)",
    "square": "expr ** 2",
    "power": "expr ** 2",
}


def refuse_numpy(kind: str, name: str) -> ModelDefinitionError:
    """The error for numpy function ``name`` applied to a symbolic ``kind``: which method to use."""
    instead = _NUMPY_INSTEAD.get(name)
    hint = (
        f"use {instead}"
        if instead
        else "use the operators + - * @ ** and its methods (.sum(axis=...), .T, .reshape(...)), "
        "or bmfdsl.modeling.einsum"
    )
    return ModelDefinitionError(
        f"numpy.{name} does not apply to a {kind} (symbolic binary variables): {hint}"
    )

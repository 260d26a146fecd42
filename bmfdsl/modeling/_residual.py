"""The (masked, weighted) squared residual of an expression array, and its entry arrays.

:func:`squared_residual` is the objective of every BMF model; a mask and entry weights are
checked here, once, for it and for :meth:`~bmfdsl.modeling.ModelBuilder.declare_bmf`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bmfdsl.errors import InvalidParameterError, ModelDefinitionError, warn_caller
from bmfdsl.modeling._expr import PolyArray, as_poly


def squared_residual(
    A: Any, X: Any, mask: Any = None, entry_weights: Any = None, *, weights: Any = None
) -> Any:
    """``Σ_ij w_ij m_ij (a_ij - x_ij)²``: the (masked, weighted) squared residual.

    ``X`` is a :class:`PolyArray` (or nested lists of expressions, or numbers) of ``A``'s shape;
    ``mask`` (0/1: which entries are observed) and ``entry_weights`` (non-negative) default to
    ones. ``weights=`` is the deprecated name of ``entry_weights=``.

    >>> squared_residual(np.array([[1, 0]]), [[1, 1]])
    1.0
    >>> squared_residual(np.array([[1, 0]]), [[1, 1]], mask=[[1, 0]])
    0.0
    """
    entry_weights = renamed_entry_weights(entry_weights, weights, "squared_residual")
    data = np.asarray(A, dtype=float)
    scale = _entry_scale(data.shape, mask, entry_weights)
    if isinstance(X, PolyArray) or _nested_poly(X):
        residual = data - as_poly(X)
        if residual.shape != data.shape:
            raise ModelDefinitionError(
                f"squared_residual: X has shape {residual.shape}, A has {data.shape}"
            )
        squares = residual * residual
        return (squares if mask is None and entry_weights is None else squares * scale).sum()
    values = np.asarray(X, dtype=float)
    return float((scale * (data - values) ** 2).sum())


def _entry_scale(shape: tuple[int, ...], mask: Any, entry_weights: Any) -> np.ndarray:
    """``mask * entry_weights`` per entry, each checked (ones where absent)."""
    scale = np.ones(shape)
    if mask is not None:
        scale = scale * check_entry_array(mask, shape, "mask", binary=True)
    if entry_weights is not None:
        scale = scale * check_entry_array(entry_weights, shape, "entry_weights", binary=False)
    return scale


def renamed_entry_weights(entry_weights: Any, weights: Any, function: str) -> Any:
    """``entry_weights``, or what was passed as its old name ``weights`` (with a warning).

    ``weights`` means penalty weights everywhere else (``compile_model``, ``to_bqm``,
    ``factorize(weights=...)``); per-entry data weights are ``entry_weights``.
    """
    if weights is None:
        return entry_weights
    if entry_weights is not None:
        raise InvalidParameterError(
            f"{function}: pass entry_weights= only (weights= is its deprecated old name)"
        )
    warn_caller(
        f"{function}(weights=...) is deprecated: per-entry data weights are now "
        "entry_weights=... (weights means penalty weights)",
        DeprecationWarning,
    )
    return weights


def _nested_poly(value: Any) -> bool:
    if isinstance(value, PolyArray):
        return True
    return isinstance(value, list | tuple) and any(_nested_poly(v) for v in value)


def check_entry_array(values: Any, shape: tuple[int, ...], name: str, *, binary: bool) -> Any:
    array = np.asarray(values, dtype=float)
    if array.shape != shape:
        raise InvalidParameterError(f"{name} must have the data's shape {shape}; got {array.shape}")
    if not np.isfinite(array).all():
        raise InvalidParameterError(f"{name} must be finite (no NaN or inf)")
    if binary and not np.isin(array, (0, 1)).all():
        raise InvalidParameterError(f"{name} must hold only 0 and 1 (1 = observed entry)")
    if (array < 0).any():
        raise InvalidParameterError(f"{name} must be non-negative")
    return array

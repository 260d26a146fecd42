"""Term tables: the numpy kernels under :class:`~bmfdsl.modeling._expr.PolyArray`.

A term table is ``(elem, var, coef)``: each term's element, its one or two variables
(``var[:, 1] == -1`` for a linear term) and its coefficient. The kernels here work on the
arrays alone (products of terms within elements, pairs of terms within elements, shapes and
data checks), so :mod:`bmfdsl.modeling._expr` keeps only the array semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidParameterError, ModelDefinitionError

#: Indices of elements and variables: 32 bits halve the term tables of large models.
INDEX = np.int32
#: Bytes one stored term costs (element, two variable indices, coefficient).
TERM_BYTES = 20


def empty_terms() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An empty term table: ``(elem, var, coef)``."""
    return np.zeros(0, INDEX), np.zeros((0, 2), INDEX), np.zeros(0, np.float64)


def pairs_within_elements(elem: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair ``s < t`` of terms of the same element, for ``elem`` sorted: ``(left, right)``
    term positions, element by element, ``s`` then ``t`` ascending.

    >>> pairs_within_elements(np.array([0, 0, 0, 1, 2, 2]), 3)
    (array([0, 0, 1, 4]), array([1, 2, 2, 5]))
    """
    counts = np.bincount(elem, minlength=size)
    starts = np.cumsum(counts) - counts
    # term t of element e pairs with the later terms of e: t+1 .. end(e)-1
    later = (starts + counts)[elem] - np.arange(elem.size) - 1
    left = np.repeat(np.arange(elem.size), later)
    right = left + 1 + (np.arange(int(later.sum())) - np.repeat(np.cumsum(later) - later, later))
    return left, right


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcast shape, or :class:`ModelDefinitionError` naming the shapes."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError as exc:
        raise ModelDefinitionError(
            f"shapes {' and '.join(map(str, shapes))} do not broadcast"
        ) from exc


def as_data(value: Any) -> np.ndarray:
    """``value`` as finite float data to combine with variables."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ModelDefinitionError(
            f"cannot combine a PolyArray with {type(value).__name__}: use numbers, numpy "
            "arrays or PolyArrays"
        ) from exc
    if not np.isfinite(array).all():
        raise InvalidParameterError("data combined with model variables must be finite")
    return array


def term_products(
    ea: np.ndarray,
    va: np.ndarray,
    wa: np.ndarray,
    eb: np.ndarray,
    vb: np.ndarray,
    wb: np.ndarray,
    na: np.ndarray,
    nb: np.ndarray,
    pairs: int,
    label: Callable[[int], str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every product of a term of ``a`` with a term of ``b`` in the same element (``label``
    names a variable in the error for a product of degree above 2)."""
    if pairs == 0:
        return empty_terms()
    order_a = np.argsort(ea, kind="stable")
    order_b = np.argsort(eb, kind="stable")
    start_b = np.cumsum(nb) - nb
    sorted_ea = ea[order_a]
    reps = nb[sorted_ea]
    left = np.repeat(order_a, reps)
    within = np.arange(pairs) - np.repeat(np.cumsum(reps) - reps, reps)
    right = order_b[np.repeat(start_b[sorted_ea], reps) + within]
    elem = ea[left]
    coef = wa[left] * wb[right]
    a, b = va[left], vb[right]
    if (a[:, 1] < 0).all() and (b[:, 1] < 0).all():  # linear x linear: the common case
        x, y = a[:, 0], b[:, 0]
        same = x == y
        var = np.stack([np.minimum(x, y), np.where(same, -1, np.maximum(x, y))], axis=1)
        return elem, var, coef
    # General case: the product monomial is the union of the variables (x² = x).
    slots = np.sort(np.concatenate([a, b], axis=1), axis=1)  # -1 (absent) sorts first
    duplicate = np.zeros_like(slots, dtype=bool)
    duplicate[:, 1:] = slots[:, 1:] == slots[:, :-1]
    slots[duplicate] = -1
    slots = np.sort(slots, axis=1)
    too_high = slots[:, 1] >= 0  # three or more distinct variables
    if too_high.any():
        row = int(np.flatnonzero(too_high)[0])
        names = [label(int(v)) for v in slots[row] if v >= 0]
        raise ModelDefinitionError(
            f"the product {' * '.join(names)} has degree {len(names)}; a QUBO allows degree 2. "
            "Introduce an auxiliary variable for one product (model.binary(...) with "
            "model.constrain_product(z, x, y, ...)) and use it instead"
        )
    last = slots[:, 3]
    third = slots[:, 2]
    var = np.stack([np.where(third >= 0, third, last), np.where(third >= 0, last, -1)], axis=1)
    return elem, var, coef

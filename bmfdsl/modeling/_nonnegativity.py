"""Check that a custom penalty never goes below 0: a solver would exploit it otherwise.

Per constraint (element), three steps, cheapest first:

1. a bound: ``const + Σ min(coefficient, 0)`` is at most the penalty everywhere; at or above
   0 it is proved non-negative (products ``x y``, ``x (1 - y)``, sums of such);
2. its minimum by enumerating every assignment of its variables, for at most
   :data:`MAX_ENUMERATED` of them (``(Σ x - 1)²`` over a row, say); constraints with the same
   terms up to the names of their variables are enumerated once;
3. beyond that, a deterministic one-flip descent from a few starts: it can find a negative
   value, not prove there is none.

A negative value found is a :class:`~bmfdsl.errors.ModelDefinitionError` naming the constraint,
the value, the assignment and how it was found.

>>> from bmfdsl.modeling._expr import VariableSpace
>>> space = VariableSpace()
>>> x = space.allocate("x", (3,))
>>> check_non_negative((x.sum() - 1) ** 2, "square", space.label)     # enumerated: >= 0
>>> check_non_negative(x[0] - x[1], "d", space.label)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
bmfdsl.errors.ModelDefinitionError: constraint group 'd': the penalty of constraint 0 is -1 at ...
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bmfdsl.errors import ModelDefinitionError
from bmfdsl.modeling._expr import PolyArray
from bmfdsl.modeling._quadratize import merge_terms

#: Constraints of at most this many variables are enumerated (2^14 assignments each).
MAX_ENUMERATED = 14
#: Starts of the descent for larger constraints (all zeros, all ones, then seeded random).
_DESCENT_STARTS = 8
_TOLERANCE = 1e-9
_ROWS_PER_BLOCK = 4096


def check_non_negative(penalty: PolyArray, group: str, label: Callable[[int], str]) -> None:
    """Raise when an element of ``penalty`` can be negative (see the module doc)."""
    flat = merge_terms(penalty.reshape(-1))
    const, elem, var, coef = flat.terms
    const = np.asarray(const, dtype=float).ravel()
    bound = const + np.bincount(elem, weights=np.minimum(coef, 0.0), minlength=flat.size)
    suspects = np.flatnonzero(bound < -_TOLERANCE)
    if not suspects.size:
        return
    starts = np.searchsorted(elem, np.arange(flat.size + 1))  # merged: sorted by element
    found: dict[tuple[object, ...], tuple[float, np.ndarray, str]] = {}
    for element in suspects.tolist():
        terms = slice(starts[element], starts[element + 1])
        pairs, coefficients = var[terms], coef[terms]
        support = np.unique(pairs[pairs >= 0])
        first = np.searchsorted(support, pairs[:, 0])
        second = np.where(pairs[:, 1] >= 0, np.searchsorted(support, pairs[:, 1]), -1)
        key = (const[element], first.tobytes(), second.tobytes(), coefficients.tobytes())
        if key not in found:
            found[key] = _minimum(const[element], first, second, coefficients, support.size)
        value, point, how = found[key]
        if value < -_TOLERANCE:
            shown = [(v, b) for v, b in zip(support, point, strict=True) if b or support.size <= 6]
            where = ", ".join(f"{label(int(v))}={int(b)}" for v, b in shown)
            if len(shown) < support.size:
                where = f"{where or 'all 0'} (the others of its variables 0)"
            raise ModelDefinitionError(
                f"constraint group {group!r}: the penalty of constraint {element} is {value:g} "
                f"at {where} ({how}); a penalty must be >= 0 everywhere and 0 exactly where "
                "its constraint holds: square a residual, (expr) ** 2, or state an inequality, "
                "model.constrain(group, a <= b, ...)"
            )


def _values(
    const: float, first: np.ndarray, second: np.ndarray, coef: np.ndarray, points: np.ndarray
) -> np.ndarray:
    """The polynomial at 0/1 ``points`` (P x support), local variable indices."""
    left = points[:, first]
    right = np.where(second >= 0, points[:, np.maximum(second, 0)], 1)
    return const + (left * right) @ coef


def _minimum(
    const: float, first: np.ndarray, second: np.ndarray, coef: np.ndarray, size: int
) -> tuple[float, np.ndarray, str]:
    """``(lowest value found, its assignment, how it was found)``."""
    if size <= MAX_ENUMERATED:
        best, best_point = np.inf, np.zeros(size, np.int8)
        for start in range(0, 2**size, _ROWS_PER_BLOCK):
            codes = np.arange(start, min(start + _ROWS_PER_BLOCK, 2**size))
            points = ((codes[:, None] >> np.arange(size)) & 1).astype(np.int8)
            values = _values(const, first, second, coef, points)
            low = int(np.argmin(values))
            if values[low] < best:
                best, best_point = float(values[low]), points[low]
        return best, best_point, f"found by enumerating its {size} variables"
    rng = np.random.default_rng(0)
    starts = [np.zeros(size, np.int8), np.ones(size, np.int8)]
    starts += [rng.integers(0, 2, size).astype(np.int8) for _ in range(_DESCENT_STARTS - 2)]
    best, best_point = np.inf, starts[0]
    flips = np.eye(size, dtype=np.int8)
    for point in starts:
        value = float(_values(const, first, second, coef, point[None])[0])
        for _ in range(4 * size):  # each step lowers the value: a few passes suffice
            neighbours = point ^ flips
            values = _values(const, first, second, coef, neighbours)
            low = int(np.argmin(values))
            if values[low] >= value - _TOLERANCE:
                break
            point, value = neighbours[low], float(values[low])
        if value < best:
            best, best_point = value, point
    return best, best_point, f"found by a one-flip descent over its {size} variables"

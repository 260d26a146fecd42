"""Make a quartic objective ``Σ scale · R²`` (``R`` quadratic) quadratic with auxiliaries.

``R`` is an array of degree-2 polynomials, e.g. ``A - U @ V.T``. Two ways, as in Malik et al.:

* ``"products"``: one auxiliary ``z = x y`` per distinct product in ``R``; ``R`` becomes
  linear in the ``z`` and its square is quadratic (their Formulation 1 when
  ``R = A - U Vᵀ``);
* ``"pairs"``: for ``R = c + Σ_s q_s x_s y_s`` (no linear terms), expand
  ``R² = c² + Σ_s (2 c q_s + q_s²) x_s y_s + 2 Σ_{s<t} q_s q_t (x_s x_t)(y_s y_t)`` and give
  each distinct pair ``(x_s, x_t)`` and ``(y_s, y_t)`` one auxiliary, shared by every element
  (their reduced Formulation 2 when ``R = A - U Vᵀ``: the pairs are ``u_ik u_il`` and
  ``v_jk v_jl``).

A product the model already constrains (``constrain_product(z, x, y)``) is not given a second
auxiliary: :func:`declared_auxiliaries` finds its ``z``, so a model that declares its
auxiliaries first (the registered formulations, with their documented labels) and one that
lets the quadratizer name them get the same QUBO. This module computes index arrays only;
:meth:`bmfdsl.modeling.ModelBuilder.minimize` allocates the missing auxiliaries and their
constraints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bmfdsl.errors import ModelDefinitionError
from bmfdsl.modeling._expr import INDEX, PolyArray, pairs_within_elements

#: The ways :meth:`~bmfdsl.modeling.ModelBuilder.minimize` can quadratize squares.
QUADRATIZATIONS = ("products", "pairs")


def _merged(residual: PolyArray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(const, elem, var, coef)`` with equal terms of an element merged, pairs ordered
    ``x < y``, sorted by element."""
    const, elem, var, coef = residual.terms
    x, y = var[:, 0], var[:, 1]
    pair = y >= 0
    low = np.where(pair, np.minimum(x, y), x)
    high = np.where(pair, np.maximum(x, y), -1)
    variables = residual.space.size if residual.space is not None else int(var.max(initial=0)) + 1
    width = variables + 1  # low < width and high + 1 < width: distinct terms, distinct keys
    if residual.size * width * width < 2**62:
        # one int64 key per term: a stable sort finds the runs U @ V.T leaves (F1 300x300:
        # 1 ms, where lexsort takes 7)
        key = (elem.astype(np.int64) * width + low) * width + (high + 1)
        order = np.argsort(key, kind="stable")
    else:
        order = np.lexsort((high, low, elem))
    elem, low, high, coef = elem[order], low[order], high[order], coef[order]
    starts = np.ones(elem.size, dtype=bool)
    starts[1:] = (elem[1:] != elem[:-1]) | (low[1:] != low[:-1]) | (high[1:] != high[:-1])
    if not starts.all():  # equal terms: one term each, coefficients summed
        coef = np.bincount(np.cumsum(starts) - 1, weights=coef, minlength=int(starts.sum()))
        elem, low, high = elem[starts], low[starts], high[starts]
    keep = coef != 0
    var_out = np.stack([low[keep], high[keep]], axis=1).astype(INDEX)
    return const, elem[keep].astype(INDEX), var_out, coef[keep]


def _pair_codes(pairs: np.ndarray, width: int) -> np.ndarray:
    return pairs[:, 0].astype(np.int64) * width + pairs[:, 1]


def distinct_pairs(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an (N x 2) index array, sorted, and each row's position among them.

    One int64 code per row: ``np.unique`` on codes sorts numbers, far faster than
    ``np.unique(axis=0)``.

    >>> distinct_pairs(np.array([[2, 3], [0, 1], [2, 3]]))
    (array([[0, 1],
           [2, 3]], dtype=int32), array([1, 0, 1]))
    """
    width = int(pairs.max(initial=0)) + 1
    unique, which = np.unique(_pair_codes(pairs, width), return_inverse=True)
    distinct = np.stack([unique // width, unique % width], axis=1).astype(INDEX)
    return distinct, np.asarray(which).ravel()


def declared_auxiliaries(
    pairs: np.ndarray, z: np.ndarray, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """For each row ``(x, y)`` of ``pairs`` (``x < y``, repeats allowed), the auxiliary ``z``
    of a declared product ``z[d] = a[d] * b[d]`` with ``{a[d], b[d]} == {x, y}`` (the first
    declared, if several), or ``-1`` where there is none.

    >>> pairs = np.array([[0, 1], [1, 2], [0, 2], [1, 2]])
    >>> declared_auxiliaries(pairs, np.array([7, 9]), np.array([2, 5]), np.array([1, 6]))
    array([-1,  7, -1,  7], dtype=int32)
    """
    found = np.full(pairs.shape[0], -1, INDEX)
    if not pairs.shape[0] or not z.size:
        return found
    width = int(max(pairs.max(), a.max(), b.max())) + 1
    keys = np.minimum(a, b).astype(np.int64) * width + np.maximum(a, b)
    order = np.argsort(keys, kind="stable")  # declarations come in long ascending runs
    keys = keys[order]
    wanted = _pair_codes(pairs, width)
    position = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    hit = keys[position] == wanted
    found[hit] = z[order[position[hit]]]
    return found


def merge_terms(residual: PolyArray) -> PolyArray:
    """``residual`` with equal terms of each element merged and pairs ordered ``x < y``."""
    const, elem, var, coef = _merged(residual)
    return PolyArray(residual.space, residual.shape, const, elem, var, coef)


def product_pairs(merged: PolyArray) -> np.ndarray:
    """The product ``(x, y)`` of each quadratic term of a merged residual (``x < y``), in term
    order: the pairs that :func:`substitute_products` replaces."""
    _, _, var, _ = merged.terms
    return var[var[:, 1] >= 0]


def substitute_products(merged: PolyArray, aux: np.ndarray) -> PolyArray:
    """A merged residual with its ``t``-th product replaced by auxiliary ``aux[t]``: linear."""
    const, elem, var, coef = merged.terms
    quadratic = var[:, 1] >= 0
    var = var.copy()
    var[quadratic, 0] = aux
    var[quadratic, 1] = -1
    return PolyArray(merged.space, merged.shape, const, elem, var, coef)


@dataclass
class PairPlan:
    """What the ``"pairs"`` quadratization needs, before its auxiliaries exist.

    Each quartic term ``2 q_s q_t (x_s x_t)(y_s y_t)`` of element ``elem`` is the product of
    two factors, ``x_s x_t`` and ``y_s y_t``; a factor is a variable (``>= 0``, where the two
    are one variable: ``x x = x``), or ``-1 - k`` for the auxiliary of the pair ``pairs[k]``
    (one row per such factor: the same pair recurs across elements).
    """

    const: np.ndarray
    pairs: np.ndarray
    product_elem: np.ndarray
    product_var: np.ndarray
    product_coef: np.ndarray
    quartic_elem: np.ndarray
    quartic_factors: tuple[np.ndarray, np.ndarray]
    quartic_coef: np.ndarray


def _factor(first: np.ndarray, second: np.ndarray, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """The factor ``first * second`` per row (see :class:`PairPlan`), numbering its pairs from
    ``offset``, and those pairs."""
    low, high = np.minimum(first, second), np.maximum(first, second)
    distinct = np.flatnonzero(low != high)
    factor = low.copy()
    factor[distinct] = -1 - offset - np.arange(distinct.size, dtype=INDEX)
    return factor, np.stack([low[distinct], high[distinct]], axis=1)


def plan_pairs(residual: PolyArray) -> PairPlan:
    """Expand ``residual²`` into products and pairs of products (see the module doc)."""
    const, elem, var, coef = _merged(residual)
    if (var[:, 1] < 0).any():
        raise ModelDefinitionError(
            "quadratize='pairs' needs a residual without linear terms (c + Σ q x y, such as "
            "A - U @ V.T); use quadratize='products'"
        )
    left, right = pairs_within_elements(elem, residual.size)  # elem is sorted (_merged)
    # each quartic term x_s y_s x_t y_t = (x_s x_t)(y_s y_t): its two factors, as pairs
    x_factor, x_pairs = _factor(var[left, 0], var[right, 0], 0)
    y_factor, y_pairs = _factor(var[left, 1], var[right, 1], x_pairs.shape[0])
    flat_const = const.ravel()
    return PairPlan(
        const=const,
        pairs=np.concatenate([x_pairs, y_pairs]),
        product_elem=elem,
        product_var=var,
        product_coef=2.0 * flat_const[elem] * coef + coef * coef,
        quartic_elem=elem[left],
        quartic_factors=(x_factor, y_factor),
        quartic_coef=2.0 * coef[left] * coef[right],
    )


def pair_objective(
    plan: PairPlan, residual: PolyArray, aux: np.ndarray, scale: np.ndarray
) -> PolyArray:
    """``Σ scale · residual²`` as a quadratic array, auxiliary ``k`` being variable ``aux[k]``."""
    factors = []
    for factor in plan.quartic_factors:
        factor = factor.copy()
        pair = np.flatnonzero(factor < 0)
        factor[pair] = aux[-1 - factor[pair]]
        factors.append(factor)
    low, high = np.minimum(*factors), np.maximum(*factors)
    high[low == high] = -1
    elem = np.concatenate([plan.product_elem, plan.quartic_elem])
    var = np.concatenate([plan.product_var, np.stack([low, high], axis=1)])
    coef = np.concatenate([plan.product_coef, plan.quartic_coef])
    const = plan.const * plan.const
    if not (scale == 1).all():
        coef = coef * scale.ravel()[elem]
        const = const * scale
    keep = coef != 0
    if not keep.all():
        elem, var, coef = elem[keep], var[keep], coef[keep]
    return PolyArray(residual.space, residual.shape, const, elem, var, coef)

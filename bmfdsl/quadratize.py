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

This module computes index arrays only; :meth:`bmfdsl.dsl.ModelBuilder.minimize` allocates
the auxiliaries and their product constraints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bmfdsl.errors import ModelDefinitionError
from bmfdsl.expr import INDEX, PolyArray, pairs_within_elements

__all__ = [
    "QUADRATIZATIONS",
    "PairPlan",
    "merge_terms",
    "pair_objective",
    "plan_pairs",
    "product_pairs",
    "substitute_products",
]

#: The ways :meth:`~bmfdsl.dsl.ModelBuilder.minimize` can quadratize squares.
QUADRATIZATIONS = ("products", "pairs")


def _merged(residual: PolyArray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(const, elem, var, coef)`` with equal terms of an element merged, pairs ordered
    ``x < y``, sorted by element."""
    const, elem, var, coef = residual.terms
    x, y = var[:, 0], var[:, 1]
    pair = y >= 0
    low = np.where(pair, np.minimum(x, y), x)
    high = np.where(pair, np.maximum(x, y), -1)
    order = np.lexsort((high, low, elem))
    elem, low, high, coef = elem[order], low[order], high[order], coef[order]
    starts = np.ones(elem.size, dtype=bool)
    starts[1:] = (elem[1:] != elem[:-1]) | (low[1:] != low[:-1]) | (high[1:] != high[:-1])
    merged = np.bincount(np.cumsum(starts) - 1, weights=coef, minlength=int(starts.sum()))
    keep = merged != 0
    var_out = np.stack([low[starts][keep], high[starts][keep]], axis=1).astype(INDEX)
    return const, elem[starts][keep].astype(INDEX), var_out, merged[keep]


def _unique_pairs(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an (N x 2) index array, sorted, and each row's position among them.

    One int64 code per row: ``np.unique`` on codes sorts numbers, far faster than
    ``np.unique(axis=0)``.
    """
    width = int(pairs.max(initial=0)) + 1
    codes = pairs[:, 0].astype(np.int64) * width + pairs[:, 1]
    unique, which = np.unique(codes, return_inverse=True)
    distinct = np.stack([unique // width, unique % width], axis=1).astype(INDEX)
    return distinct, np.asarray(which).ravel()


def merge_terms(residual: PolyArray) -> PolyArray:
    """``residual`` with equal terms of each element merged and pairs ordered ``x < y``."""
    const, elem, var, coef = _merged(residual)
    return PolyArray(residual.space, residual.shape, const, elem, var, coef)


def product_pairs(merged: PolyArray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct products ``(x, y)`` of a merged residual (P x 2, ``x < y``) and, per
    quadratic term, which of them it is."""
    _, _, var, _ = merged.terms
    return _unique_pairs(var[var[:, 1] >= 0])


def substitute_products(merged: PolyArray, which: np.ndarray, aux: np.ndarray) -> PolyArray:
    """A merged residual with each product replaced by its auxiliary ``aux[which]``: linear."""
    const, elem, var, coef = merged.terms
    quadratic = var[:, 1] >= 0
    var = var.copy()
    var[quadratic, 0] = aux[which]
    var[quadratic, 1] = -1
    return PolyArray(merged.space, merged.shape, const, elem, var, coef)


@dataclass
class PairPlan:
    """What the ``"pairs"`` quadratization needs, before its auxiliaries exist.

    ``pairs`` (P x 2) are the distinct variable pairs that get an auxiliary. Each quartic
    term ``2 q_s q_t (x_s x_t)(y_s y_t)`` of element ``elem`` is the product of two factors;
    a factor is a variable (``>= 0``) or auxiliary ``-1 - k`` for ``pairs[k]``.
    """

    const: np.ndarray
    pairs: np.ndarray
    product_elem: np.ndarray
    product_var: np.ndarray
    product_coef: np.ndarray
    quartic_elem: np.ndarray
    quartic_factors: np.ndarray
    quartic_coef: np.ndarray


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
    halves = np.concatenate(
        [
            np.stack([var[left, 0], var[right, 0]], axis=1),
            np.stack([var[left, 1], var[right, 1]], axis=1),
        ]
    )
    halves.sort(axis=1)
    distinct = halves[:, 0] != halves[:, 1]
    pairs, which = _unique_pairs(halves[distinct])
    factors = halves[:, 0].astype(np.int64)  # x x = x: a repeated variable is its own factor
    factors[distinct] = -1 - which
    flat_const = const.ravel()
    return PairPlan(
        const=const,
        pairs=pairs,
        product_elem=elem,
        product_var=var,
        product_coef=2.0 * flat_const[elem] * coef + coef * coef,
        quartic_elem=elem[left],
        quartic_factors=factors.reshape(2, -1).T.copy(),
        quartic_coef=2.0 * coef[left] * coef[right],
    )


def pair_objective(
    plan: PairPlan, residual: PolyArray, aux: np.ndarray, scale: np.ndarray
) -> PolyArray:
    """``Σ scale · residual²`` as a quadratic array, auxiliary ``k`` being variable ``aux[k]``."""
    factors = np.where(
        plan.quartic_factors >= 0,
        plan.quartic_factors,
        aux[np.clip(-1 - plan.quartic_factors, 0, None)] if aux.size else 0,
    )
    low, high = factors.min(axis=1), factors.max(axis=1)
    quartic_var = np.stack([low, np.where(low == high, -1, high)], axis=1).astype(INDEX)
    flat_scale = scale.ravel()
    elem = np.concatenate([plan.product_elem, plan.quartic_elem])
    var = np.concatenate([plan.product_var, quartic_var])
    coef = np.concatenate([plan.product_coef, plan.quartic_coef]) * flat_scale[elem]
    const = plan.const * plan.const * scale
    keep = coef != 0
    return PolyArray(residual.space, residual.shape, const, elem[keep], var[keep], coef[keep])

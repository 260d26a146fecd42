"""Penalty weights large enough by construction: every minimum of the QUBO is feasible.

The argument is one flip. Take an assignment that breaks a constraint ``c`` of group ``g``.
For the paper's two constraint kinds some single variable ``x`` of ``c`` (its *repair*
variable) can be flipped to lower ``c``'s penalty by at least ``1``:

* product ``z = ab`` with ``f(z, a, b) = ab - 2az - 2bz + 3z``: ``f`` is 0 when ``z = ab`` and
  at least 1 otherwise, so setting ``z`` to ``ab`` lowers it by ``>= 1`` (repair: ``z``);
* one-hot ``1 - Σ x + 2 Σ_{k<l} x_k x_l = (t - 1)²`` with ``t`` ones: from ``t = 0`` set any
  ``x`` to 1, from ``t >= 2`` clear a 1; either lowers it by ``>= 1`` (repair: every ``x``);
* inequality ``Σ a x <= b`` with every ``a = ±1`` (``constrain_at_most``/``_at_least``, sums
  and differences of variables), penalty ``D²`` with ``D = Σ a x + σ - b`` and slack
  ``σ`` in ``0 .. S``, ``S = b + n₋`` (``n₋``: the coefficients -1; see
  :mod:`bmfdsl.modeling._inequalities`). Broken means the integer ``D != 0``. If ``D > 0``
  some ``x`` with ``a = +1`` is 1 or one with ``a = -1`` is 0 (else ``Σ a x = -n₋`` and
  ``D <= -n₋ + S - b = 0``); if ``D < 0`` some ``x`` with ``a = +1`` is 0 or with ``a = -1`` is 1
  (else ``Σ a x = n₊``, the most it can be, and ``D >= n₊ - b > 0``: the group keeps only
  constraints that can fail). Flipping that ``x`` moves ``D`` one step towards 0 and lowers
  ``D²`` by ``2|D| - 1 >= 1`` (repair: every ``x``; the slack never needs to move). Other
  coefficients have no such flip (``a = 5``, ``D = 1``): those groups raise, as below.

Flipping ``x`` changes every other part of the energy by at most the sum of the absolute
coefficients of its terms that contain ``x``: ``S_obj(x)`` in the objective and ``S_h(x)`` in
each other group ``h`` (times its weight). So if

    λ_g > max over repair variables x of g of  S_obj(x) + Σ_{h != g} λ_h S_h(x)

the flip strictly lowers the energy, and no assignment breaking ``g`` is a minimum. Weights are
computed in dependency order (``λ_onehot`` after the ``λ`` of the products its rows touch);
a repair variable that sits in two constraints of its own group, or a cycle between weights,
has no such bound, and neither do OR chains, custom groups and inequalities with a
coefficient other than ±1: those raise
:class:`~bmfdsl.errors.InvalidParameterError` asking for an explicit weight.

The bounds are sufficient, not tight: Formulation 1 on 0/1 data gets ``λ > 2r - 1``, where
the paper's ``λ = 1`` usually works in practice but carries no guarantee.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.modeling._declaration import ConstraintGroup, Declaration
from bmfdsl.modeling._expr import PolyArray
from bmfdsl.modeling._quadratize import merge_terms

#: The weight value that asks for :func:`sufficient_weights` (``to_bqm(lam="sufficient")``).
SUFFICIENT = "sufficient"
#: How far above the bound (relative, at least this much absolute): clear of rounding in
#: solvers that scale or quantize biases.
_MARGIN = 1e-3


def sufficient_weights(
    declaration: Declaration, objective_weights: Mapping[str, float] | None = None
) -> dict[str, float]:
    """A weight per constrained weight name under which every QUBO minimum is feasible.

    Weights that no group uses are left out. ``objective_weights`` gives the values of the
    weights that multiply objective terms (``mu * U.sum()``): a flip's gain in the objective
    counts each weighted part at its value.

    >>> import numpy as np
    >>> from bmfdsl.modeling import ModelBuilder, quadratized_residual
    >>> model = ModelBuilder(np.ones((2, 3)), rank=2)
    >>> quadratized_residual(model)                       # Formulation 1, r = 2
    >>> sufficient_weights(model.declaration())["lam"]    # > 2r - 1 = 3
    3.003
    """
    size = declaration.space.size
    objective = _absolute_sums(declaration.objective, size)
    groups = list(declaration.groups.values())
    given = dict(objective_weights or {})
    for name, part in declaration.weighted_objective.items():
        if name not in given:
            raise InvalidParameterError(
                f"no sufficient weights without a value of objective weight {name!r}; pass "
                f"{name}=... as a number"
            )
        objective += abs(given[name]) * _absolute_sums(part, size)
    penalties = {g.name: g.penalties for g in groups}
    sums = {g.name: _absolute_sums(penalties[g.name], size) for g in groups}
    repair = {g.name: _repair_variables(g, penalties[g.name], size) for g in groups}
    by_weight: dict[str, list[ConstraintGroup]] = {}
    for group in groups:
        by_weight.setdefault(group.weight, []).append(group)
    needs = {  # weight -> the other weights its groups' repair variables feel
        weight: {
            h.weight
            for g in members
            for h in groups
            if h is not g and sums[h.name][repair[g.name]].any()
        }
        for weight, members in by_weight.items()
    }
    values: dict[str, float] = {}
    while len(values) < len(by_weight):
        ready = [w for w in by_weight if w not in values and needs[w] <= values.keys()]
        if not ready:
            stuck = sorted(w for w in by_weight if w not in values)
            raise InvalidParameterError(
                f"no sufficient value for weights {stuck}: their groups' variables depend on "
                "each other (or a group on another group of the same weight); pass them "
                "explicitly"
            )
        for weight in ready:
            bound = 0.0
            for group in by_weight[weight]:
                felt = objective.copy()
                for h in groups:
                    if h is not group:
                        felt += values.get(h.weight, 0.0) * sums[h.name]
                bound = max(bound, float(felt[repair[group.name]].max(initial=0.0)))
            values[weight] = bound + _MARGIN * max(1.0, bound)
    return values


def resolve_sufficient(
    weights: Mapping[str, object], sufficient: Mapping[str, float]
) -> dict[str, object]:
    """``weights`` with every ``"sufficient"`` value replaced from ``sufficient``."""
    resolved = dict(weights)
    for name, value in weights.items():
        if isinstance(value, str) and value == SUFFICIENT:
            if name not in sufficient:
                raise InvalidParameterError(
                    f"weight {name!r} weighs no constraint group, so it has no sufficient "
                    "value; pass a number"
                )
            resolved[name] = sufficient[name]
    return resolved


def _absolute_sums(poly: PolyArray, size: int) -> np.ndarray:
    """Per variable: Σ |coefficient| over the terms that contain it, equal terms of each
    element merged first (the objective is one element: its terms merge whole)."""
    _, _, var, coef = merge_terms(poly).terms
    magnitude = np.abs(coef)
    pair = var[:, 1] >= 0
    return np.bincount(var[:, 0], weights=magnitude, minlength=size) + np.bincount(
        var[pair, 1], weights=magnitude[pair], minlength=size
    )


def _repair_variables(group: ConstraintGroup, penalties: PolyArray, size: int) -> np.ndarray:
    """The variables whose flip repairs a broken constraint of ``group`` (see module doc)."""
    if group.kind == "product":
        repair = group.product_indices[0]
    elif group.kind == "one_hot":
        repair = np.concatenate([rows.ravel() for rows in group.rows])
    elif group.kind == "inequality" and all(r.unit_coefficients for r in group.inequalities):
        repair = np.concatenate([r.lhs.terms[2][:, 0] for r in group.inequalities])
    else:
        raise InvalidParameterError(
            f"no sufficient weight is known for group {group.name!r} (kind {group.kind!r}"
            + ("; a coefficient is not ±1" if group.kind == "inequality" else "")
            + f"); pass weight {group.weight!r} explicitly"
        )
    # the argument flips a repair variable inside one constraint: it must be in no other
    _, elem, var, _ = penalties.terms
    touched = np.concatenate([var[:, 0], var[var[:, 1] >= 0, 1]])
    owner = np.concatenate([elem, elem[var[:, 1] >= 0]])
    pairs = np.unique(touched.astype(np.int64) * penalties.size + owner)
    constraints_per_variable = np.bincount(pairs // penalties.size, minlength=size)
    if (constraints_per_variable[repair] > 1).any():
        raise InvalidParameterError(
            f"group {group.name!r} shares a variable between two of its constraints, so no "
            f"sufficient weight is known; pass weight {group.weight!r} explicitly"
        )
    return np.asarray(repair)

"""The PyQUBO twin of a declaration: the reference semantics of every model.

Each term of the recorded declaration becomes a PyQUBO product of ``Binary`` variables with the
same labels; each constraint group becomes ``Constraint(Placeholder(weight) * penalty,
label=group)``, and a weighted objective term ``Placeholder(weight) * term``. PyQUBO's own
``compile()`` then does the reduction ``x² = x``, the merging of terms and the weighting,
independently of :mod:`bmfdsl.modeling._qubo`.
"""

from __future__ import annotations

from typing import Any

import pyqubo

from bmfdsl.modeling._declaration import Declaration
from bmfdsl.modeling._expr import PolyArray


def _expression(poly: PolyArray, binaries: dict[int, Any], labels: list[str]) -> Any:
    """The sum of every element of ``poly`` as a PyQUBO expression."""
    const, _, var, coef = poly.terms

    def binary(index: int) -> Any:
        if index not in binaries:
            binaries[index] = pyqubo.Binary(labels[index])
        return binaries[index]

    total: Any = float(const.sum())
    for (first, second), value in zip(var.tolist(), coef.tolist(), strict=True):
        term = value * binary(first)
        total = total + (term * binary(second) if second >= 0 else term)
    return total


def hamiltonian(declaration: Declaration) -> Any:
    """Objective plus one ``Constraint(Placeholder(weight) * penalty, label=group)`` per group."""
    labels = declaration.space.labels()
    binaries: dict[int, Any] = {}
    total = _expression(declaration.objective, binaries, labels)
    for name, part in declaration.weighted_objective.items():
        total = total + pyqubo.Placeholder(name) * _expression(part, binaries, labels)
    for group in declaration.groups.values():
        penalty = _expression(group.penalties, binaries, labels)
        total = total + pyqubo.Constraint(
            pyqubo.Placeholder(group.weight) * penalty, label=group.name
        )
    return total

"""The modeling DSL: declare a BMF formulation symbolically with PyQUBO.

A model script defines ``build(model)``; ``model`` is a :class:`ModelBuilder` holding the data
(``model.A``, ``model.rank``, ``model.one_hot``) and the building blocks:

* :meth:`ModelBuilder.factors` — the binary factor matrices ``U[i][k]`` and ``V[j][k]``;
* :meth:`ModelBuilder.binary` — auxiliary binary arrays (PyQUBO ``Array`` labels);
* :meth:`ModelBuilder.weight` — a named penalty weight, a PyQUBO ``Placeholder``;
* :meth:`ModelBuilder.constrain_product` — ``z = a*b`` enforced by the paper's penalty
  :func:`product_penalty` in a labelled constraint group;
* :meth:`ModelBuilder.one_hot_constraint` — every row of a factor holds exactly one 1;
* :meth:`ModelBuilder.minimize` — add to the objective (see :func:`squared_residual`).

Each constraint group becomes one PyQUBO ``Constraint(weight * penalty, label=group)``, so
broken constraints are reported per group and weights are tuned without recompiling.

>>> import numpy as np
>>> model = ModelBuilder(np.array([[1, 0], [1, 1]]), rank=1)
>>> U, V = model.factors()
>>> W = model.binary("W", (1, 2, 2))
>>> lam = model.weight("lam")
>>> for i in range(2):
...     for j in range(2):
...         model.constrain_product(W[0][i][j], U[i][0], V[j][0], group="W", weight=lam)
>>> model.minimize(squared_residual(model.A, [[W[0][i][j] for j in range(2)] for i in range(2)]))
>>> sorted(model.weights), sorted(model.groups)
(['lam'], ['W'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyqubo

from bmfdsl.errors import InvalidParameterError, ModelDefinitionError
from bmfdsl.structure import BMFStructure, OneHotSide

__all__ = [
    "ConstraintGroup",
    "ModelBuilder",
    "WeightSpec",
    "one_hot_penalty",
    "product_penalty",
    "squared_residual",
]


def product_penalty(z: Any, a: Any, b: Any) -> Any:
    """The paper's penalty ``f(z, a, b) = ab - 2az - 2bz + 3z`` for ``z = a*b``.

    It is 0 when ``z == a*b`` and at least 1 otherwise (all arguments binary).

    >>> [product_penalty(z, a, b) for z in (0, 1) for a in (0, 1) for b in (0, 1)]
    [0, 0, 0, 1, 3, 1, 1, 0]
    """
    return a * b - 2 * a * z - 2 * b * z + 3 * z


def one_hot_penalty(variables: Sequence[Any]) -> Any:
    """The paper's one-hot penalty ``1 - Σ x_k + 2 Σ_{k<l} x_k x_l`` (0 iff exactly one is 1).

    >>> [one_hot_penalty(x) for x in ([0, 0], [1, 0], [0, 1], [1, 1])]
    [1, 0, 0, 1]
    """
    penalty: Any = 1
    for k, x in enumerate(variables):
        penalty = penalty - x
        for y in variables[k + 1 :]:
            penalty = penalty + 2 * x * y
    return penalty


def squared_residual(A: np.ndarray, X: Sequence[Sequence[Any]]) -> Any:
    """``Σ_ij (a_ij - x_ij)²`` for a 0/1 matrix ``A`` and a matrix ``X`` of expressions.

    >>> squared_residual(np.array([[1, 0]]), [[1, 1]])
    1
    """
    total: Any = 0
    for i, row in enumerate(X):
        for j, x in enumerate(row):
            total = total + (int(A[i, j]) - x) ** 2
    return total


@dataclass(frozen=True)
class WeightSpec:
    """A penalty weight: required (``default=None``), a number, or another weight's name."""

    name: str
    default: float | str | None = None


@dataclass
class ConstraintGroup:
    """A labelled group of penalties sharing one weight.

    ``kind`` is ``"product"`` (``triples`` holds ``(z, a, b)`` labels) or ``"one_hot"``
    (``rows`` holds the labels of each one-hot row).
    """

    name: str
    weight: str
    kind: Literal["product", "one_hot"]
    triples: list[tuple[str, str, str]] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    penalty: Any = 0


def _label(expression: Any, role: str) -> str:
    """The variable label of a PyQUBO ``Binary`` (other expressions are rejected)."""
    if isinstance(expression, pyqubo.Binary):
        return str(expression).removeprefix("Binary('").removesuffix("')")
    raise ModelDefinitionError(
        f"{role} must be a single binary variable (an element of model.binary(...) or "
        f"model.factors()); got {expression!r}"
    )


class ModelBuilder:
    """Collects one model declaration; passed to a model script's ``build(model)``.

    Attributes:
        A: the data matrix (0/1 ``int8``).
        rank: the target rank ``r``.
        one_hot: ``"U"``, ``"V"`` or ``None``: which factor's rows must be one-hot.
    """

    def __init__(self, A: np.ndarray, rank: int, one_hot: OneHotSide | None = None) -> None:
        self.A = np.asarray(A, dtype=np.int8)
        self.rank = int(rank)
        self.one_hot = one_hot
        self.objective: Any = 0
        self.weights: dict[str, WeightSpec] = {}
        self.groups: dict[str, ConstraintGroup] = {}
        self.arrays: dict[str, tuple[int, ...]] = {}
        self.factor_names: tuple[str, str] | None = None
        self.is_plain_bmf = False
        self._placeholders: dict[str, pyqubo.Placeholder] = {}
        self._one_hot_declared = False

    # -- variables -------------------------------------------------------------------------
    def binary(self, name: str, shape: tuple[int, ...]) -> Any:
        """A PyQUBO binary ``Array`` with labels ``name[i][j]...``."""
        if name in self.arrays:
            raise ModelDefinitionError(f"variable array {name!r} is declared twice")
        shape = tuple(int(s) for s in shape)
        self.arrays[name] = shape
        return pyqubo.Array.create(name, shape=shape, vartype="BINARY")

    def factors(self, u_name: str = "U", v_name: str = "V") -> tuple[Any, Any]:
        """Declare the factor matrices ``U`` (m x r) and ``V`` (n x r); returns both arrays."""
        m, n = self.A.shape
        U = self.binary(u_name, (m, self.rank))
        V = self.binary(v_name, (n, self.rank))
        self.factor_names = (u_name, v_name)
        self._factor_arrays = (U, V)
        return U, V

    # -- weights ---------------------------------------------------------------------------
    def weight(self, name: str, default: float | str | None = None) -> Any:
        """A named penalty weight (a PyQUBO ``Placeholder``), fed at ``to_bqm`` time.

        ``default=None`` makes the weight required; a string makes it default to another
        weight's value (``weight("lam_onehot", default="lam")``).
        """
        spec = WeightSpec(name, default)
        known = self.weights.get(name)
        if known is not None and known != spec:
            raise ModelDefinitionError(
                f"weight {name!r} declared twice with different defaults: {known.default!r} "
                f"and {default!r}"
            )
        self.weights[name] = spec
        return self._placeholders.setdefault(name, pyqubo.Placeholder(name))

    def _weight_name(self, weight: Any) -> str:
        if isinstance(weight, str):
            if weight not in self.weights:
                self.weight(weight)
            return weight
        for name, placeholder in self._placeholders.items():
            if placeholder is weight:
                return name
        raise ModelDefinitionError(
            "weight must be a name or a Placeholder returned by model.weight(...)"
        )

    def _group(
        self, name: str, weight: Any, kind: Literal["product", "one_hot"]
    ) -> ConstraintGroup:
        weight_name = self._weight_name(weight)
        group = self.groups.get(name)
        if group is None:
            group = self.groups[name] = ConstraintGroup(name, weight_name, kind)
        elif group.weight != weight_name or group.kind != kind:
            raise ModelDefinitionError(
                f"constraint group {name!r} mixes weights or kinds "
                f"({group.weight}/{group.kind} vs {weight_name}/{kind})"
            )
        return group

    # -- constraints -----------------------------------------------------------------------
    def constrain_product(self, z: Any, a: Any, b: Any, *, group: str, weight: Any) -> None:
        """Enforce ``z = a*b`` with ``weight * f(z, a, b)`` in constraint group ``group``."""
        labels = (_label(z, "z"), _label(a, "a"), _label(b, "b"))
        target = self._group(group, weight, "product")
        target.triples.append(labels)
        target.penalty = target.penalty + product_penalty(z, a, b)

    def constrain_one_hot(self, variables: Sequence[Any], *, group: str, weight: Any) -> None:
        """Enforce that exactly one of ``variables`` is 1, with the paper's one-hot penalty."""
        labels = [_label(x, "one-hot variable") for x in variables]
        target = self._group(group, weight, "one_hot")
        target.rows.append(labels)
        target.penalty = target.penalty + one_hot_penalty(list(variables))

    def one_hot_constraint(self, weight: str = "lam_onehot", default: float | str = "lam") -> None:
        """Add the one-hot constraint requested by ``compile_model(one_hot=...)``, if any.

        Every row of the chosen factor (``V`` by default in the paper) must hold exactly one
        1. The group is named ``one_hot_V`` (or ``one_hot_U``); its weight defaults to ``lam``.
        Does nothing when no one-hot constraint was requested.
        """
        self._one_hot_declared = True
        if self.one_hot is None:
            return
        if self.factor_names is None:
            raise ModelDefinitionError("declare model.factors() before model.one_hot_constraint()")
        self.weight(weight, default)
        factor = self._factor_arrays[0 if self.one_hot == "U" else 1]
        rows = self.A.shape[0 if self.one_hot == "U" else 1]
        for row in range(rows):
            self.constrain_one_hot(
                [factor[row][k] for k in range(self.rank)],
                group=f"one_hot_{self.one_hot}",
                weight=weight,
            )

    # -- objective -------------------------------------------------------------------------
    def minimize(self, expression: Any) -> None:
        """Add ``expression`` to the objective."""
        self.objective = self.objective + expression

    def declare_plain_bmf(self) -> None:
        """Declare that on feasible points the energy equals ``||A - U Vᵀ||²_F`` exactly.

        This lets structure-aware backends (``native``) solve the model directly.
        """
        self.is_plain_bmf = True

    # -- results ---------------------------------------------------------------------------
    def check_complete(self, source: str) -> None:
        """Raise :class:`ModelDefinitionError` when the declaration cannot be compiled."""
        if self.factor_names is None:
            raise ModelDefinitionError(f"{source}: build(model) never called model.factors()")
        if self.one_hot is not None and not self._one_hot_declared:
            raise ModelDefinitionError(
                f"{source} does not support one_hot={self.one_hot!r}: its build(model) never "
                "calls model.one_hot_constraint()"
            )
        for spec in self.weights.values():
            if isinstance(spec.default, str) and spec.default not in self.weights:
                raise ModelDefinitionError(
                    f"{source}: weight {spec.name!r} defaults to unknown weight {spec.default!r}"
                )

    @property
    def structure(self) -> BMFStructure | None:
        """The :class:`BMFStructure` when declared plain BMF, else ``None``."""
        if not self.is_plain_bmf:
            return None
        return BMFStructure(self.A, self.rank, self.one_hot)

    def hamiltonian(self) -> Any:
        """Objective plus one ``Constraint(weight * penalty, label=group)`` per group."""
        total = self.objective
        for group in self.groups.values():
            placeholder = self._placeholders[group.weight]
            total = total + pyqubo.Constraint(placeholder * group.penalty, label=group.name)
        if isinstance(total, int | float):
            raise InvalidParameterError("the model declares no objective and no constraints")
        return total

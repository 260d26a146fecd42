"""What a model script declared, as term tables: the records a declaration is made of.

:class:`~bmfdsl.modeling.ModelBuilder` collects a declaration; :meth:`ModelBuilder.declaration`
hands it over as a :class:`Declaration`: the variables, the named penalty weights, the
constraint groups (index arrays, or penalty term tables for OR and custom groups), the
objective's term table and the structure claim. Everything here is linear in the penalty
weights, so a compiled model keeps one :class:`Declaration` and lowers it, checks it, bounds its
weights and emits its PyQUBO twin from it, without running the script again.

The penalties of the paper's constraint kinds live here too (:func:`product_penalty`,
:func:`one_hot_penalty` and their vectorized term tables), since a group builds its penalties
from its index arrays on demand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from bmfdsl.modeling._expr import INDEX, PolyArray, VariableSpace
from bmfdsl.modeling._inequalities import InequalityRows
from bmfdsl.modeling._qubo import narrowest_exact
from bmfdsl.modeling._structure import OneHotSide, RowLimits
from bmfdsl.modeling._weighted import Weight as Weight  # re-exported: its old home

GroupKind = Literal["product", "one_hot", "or", "xor", "custom", "inequality"]


def product_penalty(z: Any, a: Any, b: Any) -> Any:
    """The paper's penalty ``f(z, a, b) = ab - 2az - 2bz + 3z`` for ``z = a*b``.

    It is 0 when ``z == a*b`` and at least 1 otherwise (all arguments binary).

    >>> [product_penalty(z, a, b) for z in (0, 1) for a in (0, 1) for b in (0, 1)]
    [0, 0, 0, 1, 3, 1, 1, 0]
    """
    return a * b - 2 * a * z - 2 * b * z + 3 * z


def one_hot_penalty(variables: Any, axis: int = -1) -> Any:
    """The paper's one-hot penalty ``1 - Σ x_k + 2 Σ_{k<l} x_k x_l`` (0 iff exactly one is 1).

    Works on numbers and on arrays (reducing ``axis``).

    >>> [one_hot_penalty(x) for x in ([0, 0], [1, 0], [0, 1], [1, 1])]
    [1, 0, 0, 1]
    """
    if isinstance(variables, PolyArray):
        total = variables.sum(axis=axis)
        return (total * total - total) - total + 1  # (Σx)² = Σx + 2Σ_{k<l}: same polynomial
    values = list(variables)
    penalty: Any = 1
    for k, x in enumerate(values):
        penalty = penalty - x
        for y in values[k + 1 :]:
            penalty = penalty + 2 * x * y
    return penalty


@dataclass(frozen=True)
class WeightSpec:
    """A penalty weight: required (``default=None``), a number, or another weight's name."""

    name: str
    default: float | str | None = None


@dataclass
class ConstraintGroup:
    """A labelled group of elementwise penalties sharing one weight.

    ``penalties`` holds one polynomial per constraint (each >= 0, and 0 exactly when the
    constraint holds). Kind-specific index arrays let ``encode`` fill auxiliaries and
    ``decode`` count broken constraints fast: ``triples`` (``z, a, b`` of ``z = a*b``),
    ``rows`` (one-hot rows), ``chains`` (OR outputs, inputs and chain auxiliaries) and
    ``inequalities`` (the left sides and slacks of ``lhs <= 0``).
    Product and one-hot penalties are built from their index arrays when asked for, so a
    declaration holds only the indices (and a loop that declares one product at a time
    stays cheap); OR, custom and inequality groups keep their penalty ``chunks``.
    """

    name: str
    weight: str
    kind: GroupKind
    space: VariableSpace
    chunks: list[PolyArray] = field(default_factory=list)
    triples: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    chains: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    inequalities: list[InequalityRows] = field(default_factory=list)
    # XOR outputs, their inputs and the bits of half the inputs' sum: y = Σx - 2 Σ 2^b t_b
    parities: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)

    @property
    def penalties(self) -> PolyArray:
        """Every constraint's penalty, as one 1-D array (built anew for product and one-hot
        groups: keep the result rather than asking twice)."""
        if self.kind == "product":
            return _product_penalties(self.space, *self.product_indices)
        chunks = self.chunks
        if self.kind == "one_hot":
            chunks = [one_hot_penalty(self.space.array(rows), axis=-1) for rows in self.rows]
        flat = [chunk.reshape(-1) for chunk in chunks]
        return flat[0] if len(flat) == 1 else _concatenate(flat)

    @property
    def product_indices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(z, a, b)`` variable indices of a product group."""
        if len(self.triples) == 1:
            return self.triples[0]
        z, a, b = (np.concatenate(column) for column in zip(*self.triples, strict=True))
        return z, a, b


def _concatenate(parts: Sequence[PolyArray]) -> PolyArray:
    """1-D arrays joined end to end."""
    sizes = [p.size for p in parts]
    offsets = np.cumsum([0, *sizes[:-1]])
    terms = [p.terms for p in parts]
    return PolyArray(
        parts[0].space,
        (int(sum(sizes)),),
        np.concatenate([t[0].ravel() for t in terms]),
        np.concatenate([t[1] + o for t, o in zip(terms, offsets, strict=True)]),
        np.concatenate([t[2] for t in terms]),
        np.concatenate([t[3] for t in terms]),
    )


@dataclass(frozen=True)
class StructureClaim:
    """What ``declare_bmf`` claims: feasible energy == ``Σ w m (a - (U ∘ V))² + L1 terms``
    (``∘``: the ``product``), with rows of ``U``, ``V`` within ``row_limits``."""

    mask: np.ndarray | None = None
    entry_weights: np.ndarray | None = None
    mask_source: str | None = None  # the model.data key the mask came from
    entry_weights_source: str | None = None
    product: str = "sum"
    l1: tuple[float | str, float | str] = (0.0, 0.0)  # a number or a model weight's name
    row_limits: tuple[RowLimits | None, RowLimits | None] = (None, None)


@dataclass(frozen=True)
class SummedTerms:
    """The term table of a summed (0-d) polynomial, such as a model's objective, kept small.

    Every term belongs to the one element, so no element column is stored, and coefficients
    are kept in the narrowest float that holds them exactly (BMF objectives: small integers):
    10 bytes a term instead of a :class:`PolyArray`'s 20. :meth:`poly` gives back the same
    terms, in the same order, as a :class:`PolyArray`.
    """

    const: np.ndarray
    var: np.ndarray
    coef: np.ndarray

    @classmethod
    def of(cls, poly: PolyArray) -> SummedTerms:
        """The terms of the 0-d ``poly``."""
        if poly.ndim:
            raise ValueError(f"SummedTerms holds a 0-d polynomial; got shape {poly.shape}")
        const, _, var, coef = poly.terms
        return cls(const, np.asarray(var, dtype=INDEX), narrowest_exact(coef))

    def poly(self, space: VariableSpace) -> PolyArray:
        """The terms as a 0-d :class:`PolyArray` over ``space`` (float64 coefficients)."""
        count = self.var.shape[0]
        element = np.broadcast_to(np.zeros(1, INDEX), (count,))  # every term in element 0
        coef = self.coef.astype(np.float64, copy=False)
        return PolyArray(space, (), self.const, element, self.var, coef)


@dataclass(frozen=True, eq=False)
class Declaration:
    """One model declared on one instance: what its ``build(model)`` left on the builder.

    Made by :meth:`~bmfdsl.modeling.ModelBuilder.declaration`; read-only by convention
    (its arrays are shared, not copied). ``objective`` is rebuilt from the compact
    :class:`SummedTerms` on each access: keep the result rather than asking twice.

    Attributes:
        A: the data matrix (0/1 ``int8``).
        rank: the target rank ``r``.
        one_hot: ``"U"``, ``"V"`` or ``None``.
        space: the declared variables.
        weights: the penalty weights, by name.
        groups: the constraint groups, by name, in declaration order.
        factor_names: the names of ``U`` and ``V`` (``None`` before ``model.factors()``).
        factor_arrays: ``U`` and ``V`` as arrays of variables.
        claim: the structure claim of ``model.declare_bmf``, or ``None``.
        error_function: the error metric of ``model.declare_error``, or ``None``.
        objective_terms: the objective's unweighted terms.
        weighted_objective_terms: the objective's terms multiplied by a weight, by its name
            (``model.minimize(mu * U.sum())``): the energy adds ``mu`` times their value.
    """

    A: np.ndarray
    rank: int
    one_hot: OneHotSide | None
    space: VariableSpace
    weights: Mapping[str, WeightSpec]
    groups: Mapping[str, ConstraintGroup]
    factor_names: tuple[str, str] | None
    factor_arrays: tuple[PolyArray, PolyArray] | None
    claim: StructureClaim | None
    error_function: Callable[[np.ndarray, np.ndarray], np.ndarray] | None
    objective_terms: SummedTerms
    weighted_objective_terms: Mapping[str, SummedTerms] = field(default_factory=dict)

    @property
    def objective(self) -> PolyArray:
        """The objective's unweighted part (0-d), rebuilt from its compact terms."""
        return self.objective_terms.poly(self.space)

    @property
    def weighted_objective(self) -> dict[str, PolyArray]:
        """The objective's weighted parts (0-d each), by weight name."""
        return {
            name: terms.poly(self.space) for name, terms in self.weighted_objective_terms.items()
        }

    def objective_value(self, X: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
        """The objective at assignments ``X`` (S x all variables), weighted parts at ``weights``."""
        value = self.objective.evaluate(X).reshape(X.shape[0])
        for name, part in self.weighted_objective.items():
            value = value + weights[name] * part.evaluate(X).reshape(X.shape[0])
        return value

    @property
    def arrays(self) -> dict[str, tuple[int, ...]]:
        """Declared variable arrays: name -> shape."""
        return {name: block.shape for name, block in self.space.blocks.items()}

    @property
    def single_factor(self) -> bool:
        """True for a model of one factor (``model.factor()``: ``A ≈ U Uᵀ``, ``V`` is ``U``)."""
        return self.factor_names is not None and self.factor_names[0] == self.factor_names[1]


def snapshot_groups(groups: Mapping[str, ConstraintGroup]) -> dict[str, ConstraintGroup]:
    """The groups with their lists copied: later declarations on a builder leave them alone."""
    return {
        name: replace(
            group,
            chunks=list(group.chunks),
            triples=list(group.triples),
            rows=list(group.rows),
            chains=list(group.chains),
            inequalities=list(group.inequalities),
            parities=list(group.parities),
        )
        for name, group in groups.items()
    }


def _terms_array(
    space: VariableSpace,
    size: int,
    parts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, float]],
) -> PolyArray:
    """A 1-D array of ``size`` polynomials from ``(elements, x, y, coefficient)`` parts.

    ``y = -1`` marks a linear term; ``x == y`` is folded to the linear ``x`` (binary).
    """
    elems, pairs, coefs = [], [], []
    for elem, x, y, coefficient in parts:
        same = (y >= 0) & (x == y)
        first = np.where(y >= 0, np.minimum(x, y), x)
        second = np.where((y >= 0) & ~same, np.maximum(x, y), -1)
        elems.append(elem)
        pairs.append(np.stack([first, second], axis=1))
        coefs.append(np.full(elem.size, float(coefficient)))
    return PolyArray(
        space,
        (size,),
        np.zeros(size),
        np.concatenate(elems),
        np.concatenate(pairs),
        np.concatenate(coefs),
    )


def _product_penalties(
    space: VariableSpace, z: np.ndarray, a: np.ndarray, b: np.ndarray
) -> PolyArray:
    """``f(z, a, b) = ab - 2az - 2bz + 3z`` per element."""
    elem = np.arange(z.size, dtype=INDEX)
    none = np.full(z.size, -1, INDEX)
    return _terms_array(
        space,
        z.size,
        [(elem, a, b, 1.0), (elem, a, z, -2.0), (elem, b, z, -2.0), (elem, z, none, 3.0)],
    )


def or_penalties(space: VariableSpace, y: np.ndarray, x1: np.ndarray, x2: np.ndarray) -> PolyArray:
    """``y = x1 OR x2``: ``x1 + x2 + y + x1 x2 - 2 x1 y - 2 x2 y`` per element."""
    elem = np.arange(y.size, dtype=INDEX)
    none = np.full(y.size, -1, INDEX)
    return _terms_array(
        space,
        y.size,
        [
            (elem, x1, none, 1.0),
            (elem, x2, none, 1.0),
            (elem, y, none, 1.0),
            (elem, x1, x2, 1.0),
            (elem, x1, y, -2.0),
            (elem, x2, y, -2.0),
        ],
    )


def equal_penalties(space: VariableSpace, y: np.ndarray, x: np.ndarray) -> PolyArray:
    """``y = x``: ``(y - x)² = x + y - 2xy`` per element."""
    elem = np.arange(y.size, dtype=INDEX)
    none = np.full(y.size, -1, INDEX)
    return _terms_array(
        space, y.size, [(elem, x, none, 1.0), (elem, y, none, 1.0), (elem, x, y, -2.0)]
    )

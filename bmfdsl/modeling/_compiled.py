"""The compiled model: re-weight to a BQM, encode factors, decode samples, emit PyQUBO.

One :class:`CompiledModel` serves every backend: generic samplers take ``to_bqm(**weights)``,
structure-aware solvers take ``structure`` (present only when the model's claim was verified
on the instance), and both come back through :meth:`CompiledModel.decode`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import dimod
import numpy as np

from bmfdsl.errors import (
    InvalidMatrixError,
    InvalidParameterError,
    ModelDefinitionError,
    ModelTooLargeError,
    UnknownNameError,
)
from bmfdsl.linalg import random_factor
from bmfdsl.modeling._declaration import Declaration, WeightSpec
from bmfdsl.modeling._expr import TERM_BYTES
from bmfdsl.modeling._penalty_weights import SUFFICIENT, resolve_sufficient, sufficient_weights
from bmfdsl.modeling._qubo import (
    BQM_BYTES_PER_INTERACTION,
    BQM_BYTES_PER_VARIABLE,
    QuboTerms,
    lower,
)
from bmfdsl.modeling._structure import BMFStructure, OneHotSide
from bmfdsl.result import DecodedSample

#: Random feasible points (besides the one nearest zero) at which a structure claim is checked.
_CHECK_POINTS = 4


@dataclass
class VariableLayout:
    """Where the variables of interest sit among ``variables`` (the BQM's variable order).

    ``u_index`` (m x r) and ``v_index`` (n x r) are positions in ``variables``;
    ``one_hot_groups`` maps a one-hot group to its rows of positions; ``single_factor``: V
    is U (``v_index`` equals ``u_index``).
    """

    variables: list[str]
    u_index: np.ndarray
    v_index: np.ndarray
    one_hot_groups: dict[str, np.ndarray] = field(default_factory=dict)
    single_factor: bool = False


class Lowered:
    """A full declaration lowered to QUBO arrays, with only the variables it uses.

    The declaration is read, never changed: it stays the model's source of truth.
    """

    def __init__(self, declaration: Declaration) -> None:
        self.declaration = declaration
        space = declaration.space
        parts: dict[str, list[Any]] = {"": [declaration.objective]}
        for name, part in declaration.weighted_objective.items():  # linear in its weight too
            parts.setdefault(name, []).append(part)
        for group in declaration.groups.values():
            parts.setdefault(group.weight, []).append(group.penalties)
        used = np.zeros(space.size + 1, dtype=bool)  # the extra last slot takes var == -1
        for expressions in parts.values():
            for expression in expressions:
                used[expression.terms[2].ravel()] = True
        used = used[:-1]
        U, V = declaration.factor_arrays  # type: ignore[misc]
        self.u_full = U.variable_indices()
        self.v_full = V.variable_indices()
        used[self.u_full] = True
        used[self.v_full] = True
        self.positions = np.flatnonzero(used)  # BQM position -> variable index
        renumber = np.full(space.size, -1, np.int32)
        renumber[self.positions] = np.arange(self.positions.size, dtype=np.int32)
        terms = lower(parts, space.size)
        del parts  # the penalties and the objective's float64 copy: rebuilt when asked for
        all_labels = space.labels()
        if self.positions.size == space.size:  # every variable used, the common case:
            self.labels = all_labels  # the renumbering is the identity
        else:
            # unused variables have no pairs: their rows are empty, the rest keep their order
            terms.indptr = np.append(terms.indptr[self.positions], terms.indptr[-1])
            terms.col = renumber[terms.col]
            terms.linear = {k: v[self.positions] for k, v in terms.linear.items()}
            self.labels = [all_labels[i] for i in self.positions.tolist()]
        terms.num_variables = int(self.positions.size)
        self.terms = terms
        self.layout = VariableLayout(
            variables=self.labels,
            u_index=renumber[self.u_full],
            v_index=renumber[self.v_full],
            single_factor=declaration.single_factor,
            one_hot_groups={
                g.name: renumber[np.concatenate(g.rows)]
                for g in declaration.groups.values()
                if g.kind == "one_hot"
            },
        )

    def full_samples(self, samples: np.ndarray) -> np.ndarray:
        """Samples in BQM order spread over every declared variable (unused ones 0)."""
        out = np.zeros((samples.shape[0], self.declaration.space.size), dtype=np.int8)
        out[:, self.positions] = samples
        return out

    def in_bqm_order(self, X: np.ndarray) -> np.ndarray:
        """Assignments over every declared variable (S x all) restricted to the BQM's."""
        return X if self.positions.size == X.shape[1] else X[:, self.positions]

    def fill(self, U: np.ndarray, V: np.ndarray) -> np.ndarray:
        """The feasible assignments (S x all variables) for stacked ``U``, ``V``."""
        X = np.zeros((U.shape[0], self.declaration.space.size), dtype=np.int8)
        X[:, self.u_full] = U
        X[:, self.v_full] = V
        for group in self.declaration.groups.values():  # declaration order: aux of aux works
            for z, a, b in group.triples:
                X[:, z] = X[:, a] & X[:, b]
            for outputs, inputs, chain in group.chains:
                left = X[:, inputs[:, 0]]
                for t in range(1, inputs.shape[1]):
                    left = left | X[:, inputs[:, t]]
                    if t < inputs.shape[1] - 1:
                        X[:, chain[:, t - 1]] = left
                X[:, outputs] = left
            for outputs, inputs, halves in group.parities:
                total = X[:, inputs].sum(axis=2, dtype=np.int64)
                X[:, outputs] = total & 1
                for bit in range(halves.shape[1]):
                    X[:, halves[:, bit]] = (total >> (bit + 1)) & 1
            for rows in group.inequalities:
                rows.fill(X)
        return X

    def broken(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """Violated constraints per group and sample (``X`` over every declared variable)."""
        counts: dict[str, np.ndarray] = {}
        for group in self.declaration.groups.values():
            if group.kind == "product":
                z, a, b = group.product_indices
                counts[group.name] = (X[:, z] != (X[:, a] & X[:, b])).sum(axis=1)
            elif group.kind == "one_hot":
                rows = np.concatenate(group.rows)
                counts[group.name] = (X[:, rows].sum(axis=2, dtype=np.int64) != 1).sum(axis=1)
            elif group.kind == "inequality":
                counts[group.name] = sum(
                    (np.abs(rows.gaps(X)) > 1e-9).sum(axis=1) for rows in group.inequalities
                ) + np.zeros(X.shape[0], dtype=np.int64)
            else:
                values = group.penalties.evaluate(X)
                counts[group.name] = (values > 1e-9).sum(axis=1)
        return counts


def claimed_structure(declaration: Declaration, **overrides: Any) -> BMFStructure:
    """The structure a declaration's claim describes, on the declaration's own instance."""
    claim = declaration.claim
    assert claim is not None
    fields: dict[str, Any] = {
        "A": declaration.A,
        "rank": declaration.rank,
        "one_hot": declaration.one_hot,
        "mask": claim.mask,
        "entry_weights": claim.entry_weights,
        "factor_names": declaration.factor_names or ("U", "V"),
        "product": claim.product,
        "l1": claim.l1,
        "row_limits": claim.row_limits,
        "symmetric": declaration.single_factor,
    }
    fields.update(overrides)
    return BMFStructure(**fields)


def _feasible_factor(
    rng: np.random.Generator, shape: tuple[int, int], limits: tuple[int, int] | None
) -> np.ndarray:
    """Random 0/1 rows holding between ``lo`` and ``hi`` ones (any number without limits)."""
    if limits is None:
        return random_factor(rng, shape, False)
    lo, hi = limits
    out = np.zeros(shape, np.int8)
    for i in range(shape[0]):
        ones = int(rng.integers(lo, hi + 1))
        out[i, rng.choice(shape[1], size=ones, replace=False)] = 1
    return out


def verify_claim(lowered: Lowered, name: str, where: str) -> None:
    """Check a structure claim: energy == declared objective at the feasible point nearest
    zero and at random feasible points (every weight 1, or 2 for the weights in ``l1``)."""
    model = lowered.declaration
    claim = model.claim
    assert claim is not None
    m, n = model.A.shape
    r = model.rank
    rng = np.random.default_rng(20211)
    weights = {w: 1.0 for w in model.weights}
    weights.update({w: 2.0 for w in claim.l1 if isinstance(w, str)})  # not hidden by a 1
    structure = claimed_structure(model).resolved(weights)
    limits_u, limits_v = structure.limits("U"), structure.limits("V")
    zero_u = _feasible_factor(rng, (m, r), None if limits_u is None else (limits_u[0],) * 2)
    zero_v = _feasible_factor(rng, (n, r), None if limits_v is None else (limits_v[0],) * 2)
    if limits_u is None or limits_u[0] == 0:
        zero_u[:] = 0
    if limits_v is None or limits_v[0] == 0:
        zero_v[:] = 0
    if model.one_hot is not None:  # the feasible point nearest zero: every row in cluster 0
        side = zero_u if model.one_hot == "U" else zero_v
        side[:] = 0
        side[:, 0] = 1
    Us = [zero_u] + [_feasible_factor(rng, (m, r), limits_u) for _ in range(_CHECK_POINTS)]
    Vs = [zero_v] + [_feasible_factor(rng, (n, r), limits_v) for _ in range(_CHECK_POINTS)]
    U, V = np.stack(Us), np.stack(Vs)
    if model.single_factor:  # V is U
        V = U
    X = lowered.in_bqm_order(lowered.fill(U, V))
    energies = lowered.terms.energies(X, weights)
    declared = structure.objectives(U, V)
    scale = 1e-6 * max(1.0, float(np.abs(declared).max()))
    bad = np.flatnonzero(np.abs(energies - declared) > scale)
    if bad.size:
        point = int(bad[0])
        zero = "the feasible point nearest U = V = 0"
        where_point = zero if point == 0 else f"a random feasible (U, V) #{point}"
        product = {"sum": "UVᵀ", "or": "U ∘ V (Boolean OR)", "xor": "U ∘ V (XOR)"}
        extra = " + L1 terms" if structure.l1 != (0.0, 0.0) else ""
        raise ModelDefinitionError(
            f"model {name!r} declares BMF structure (model.declare_bmf) but on {where} at "
            f"{where_point} its energy is {energies[point]:g} while the declared objective "
            f"Σ w m (a - {product[structure.product]})²{extra} is {declared[point]:g}; fix "
            "the model or the claim (product=, l1=, at_most=, at_least=)"
        )


class CompiledModel:
    """A model compiled for one data matrix and rank; re-weighted without recompiling.

    Create it with :func:`bmfdsl.compile_model`.

    Attributes:
        model_name: the registered name or the script path.
        A: the data matrix (``int8``).
        rank: the target rank.
        one_hot: ``"U"``, ``"V"`` or ``None``.
        data: the extra data arrays passed to the model script.
        weights: the penalty weights the model declares, with their defaults.
        group_weights: constraint group name -> the weight it uses.
        objective_weights: the weights that multiply objective terms (``mu * U.sum()``).
        single_factor: True for a model of one factor (``model.factor()``, ``A ≈ U Uᵀ``):
            ``V`` is ``U`` in ``encode`` and in every decoded sample.
        structure_check: how the structure claim was verified (``"instance"``,
            ``"sub-instances"``) or ``None`` when the model claims no structure.
    """

    def __init__(
        self,
        *,
        model_name: str,
        A: np.ndarray,
        rank: int,
        one_hot: OneHotSide | None,
        data: Mapping[str, Any],
        metadata: Declaration,
        declare: Callable[[], Declaration],
        structure: BMFStructure | None,
        structure_check: str | None,
        size_estimate: tuple[int, int] | None = None,
        memory_limit: int | None = None,
        declaration: Declaration | None = None,
        lowered: Lowered | None = None,
    ) -> None:
        self.model_name = model_name
        self.A = A
        self.rank = rank
        self.one_hot = one_hot
        self.data = dict(data)
        self.weights: dict[str, WeightSpec] = dict(metadata.weights)
        self.group_weights = {g.name: g.weight for g in metadata.groups.values()}
        self.objective_weights = tuple(metadata.weighted_objective_terms)
        self.single_factor = metadata.single_factor
        self.structure = structure
        self.structure_check = structure_check
        self._declare = declare  # runs build(model) on this instance: at most once
        self._declaration = declaration if lowered is None else lowered.declaration
        self._lowered = lowered  # built and checked already, or on first use
        self._sufficient: dict[tuple[tuple[str, float], ...], dict[str, float]] = {}
        self._size_estimate = size_estimate  # (terms, variables) before the model is built
        self._memory_limit = memory_limit

    def __repr__(self) -> str:
        m, n = self.A.shape
        return (
            f"CompiledModel({self.model_name!r}, A={m}x{n}, rank={self.rank}, "
            f"one_hot={self.one_hot!r}, weights={list(self.weight_names)})"
        )

    @property
    def declaration(self) -> Declaration:
        """The full declaration (variables, groups, objective) on this instance.

        The model script's ``build(model)`` runs on the instance once, here or in
        ``compile_model``; everything else (BQMs at any weights, sufficient weights, the PyQUBO
        twin, encoding and decoding) is derived from this declaration.
        """
        if self._declaration is None:
            self._declaration = self._declare()
        return self._declaration

    @property
    def lowered(self) -> Lowered:
        """The full declaration lowered to QUBO arrays, on first use."""
        if self._lowered is None:
            self._check_size()  # before declaring: a model too large is refused unbuilt
            lowered = Lowered(self.declaration)
            if self.structure is not None:  # so far checked on sub-instances only
                verify_claim(lowered, self.model_name, "this instance")
                self.structure_check = "instance"
            self._lowered = lowered
        return self._lowered

    # -- sizes -----------------------------------------------------------------------------
    @property
    def weight_names(self) -> tuple[str, ...]:
        """Names of the penalty weights ``to_bqm`` takes."""
        return tuple(self.weights)

    @property
    def layout(self) -> VariableLayout:
        """Variable labels and index arrays."""
        return self.lowered.layout

    @property
    def variables(self) -> list[str]:
        """Every variable label, in the BQM's order."""
        return self.lowered.labels

    @property
    def num_variables(self) -> int:
        """The number of binary variables of the QUBO."""
        return int(self.lowered.positions.size)

    @property
    def num_interactions(self) -> int:
        """The number of distinct quadratic terms of the QUBO."""
        return self.lowered.terms.num_interactions

    @property
    def memory_estimate(self) -> int:
        """Bytes a ``dimod.BinaryQuadraticModel`` of this model takes (an estimate).

        Known before the model is built: on a large instance it is extrapolated from the
        sub-instances (interactions at most the terms), exact from the arrays once built.
        """
        if self._lowered is None and self._size_estimate is not None:
            terms, variables = self._size_estimate
            return BQM_BYTES_PER_VARIABLE * variables + BQM_BYTES_PER_INTERACTION * terms
        return (
            BQM_BYTES_PER_VARIABLE * self.num_variables
            + BQM_BYTES_PER_INTERACTION * self.num_interactions
        )

    def _check_size(self) -> None:
        """Refuse to build a model whose estimate passes the memory limit, before building."""
        if self._size_estimate is None or self._memory_limit is None:
            return
        terms, variables = self._size_estimate
        needed = TERM_BYTES * terms + self.memory_estimate
        if needed > self._memory_limit:
            raise ModelTooLargeError(
                f"model {self.model_name!r} on this {self.A.shape[0]}x{self.A.shape[1]} matrix "
                f"at rank {self.rank} would need about {needed / 2**30:.1f} GiB (about "
                f"{variables:,} variables and {terms:,} terms), over the limit of "
                f"{self._memory_limit / 2**30:.1f} GiB; sample rows "
                "(factorize(sample_rows='auto')), use the 'native' backend, lower the rank, or "
                "raise compile_model(memory_limit=...)"
            )

    @property
    def qubo(self) -> QuboTerms:
        """The QUBO arrays, linear in the weights."""
        return self.lowered.terms

    # -- weights ---------------------------------------------------------------------------
    def resolve_weights(self, **weights: Any) -> dict[str, float]:
        """Check weight names and values and fill in defaults.

        Raises:
            UnknownNameError: a name the model does not declare.
            InvalidParameterError: a required weight is missing, or a value is not a finite
                positive number (a weight of objective terms only may also be 0).
        """
        for name in weights:
            if name not in self.weights:
                raise UnknownNameError(
                    "weight", name, self.weights, hint=f"model {self.model_name!r} declares these"
                )
        asked = [name for name, value in weights.items() if _is_sufficient(value)]
        if asked:  # the bound depends on the values of the objective's weights
            objective: dict[str, float] = {}
            if self.objective_weights:
                given = {name: value for name, value in weights.items() if name not in asked}
                known = self._resolved(given, unknown=set(asked))
                objective = {name: known[name] for name in self.objective_weights if name in known}
            weights = resolve_sufficient(weights, self.sufficient_weights(**objective))
        return self._resolved(weights)

    def _resolved(
        self, weights: Mapping[str, Any], unknown: Collection[str] = ()
    ) -> dict[str, float]:
        """Every weight from ``weights`` and the defaults; with ``unknown`` names, those and the
        weights defaulting to them are left out rather than reported missing."""
        penalty = set(self.group_weights.values())
        resolved = {
            name: check_weight(name, value, allow_zero=name not in penalty)
            for name, value in weights.items()
        }
        pending = [
            spec
            for spec in self.weights.values()
            if spec.name not in resolved and spec.name not in unknown
        ]
        for _ in range(len(pending) + 1):  # resolve defaults that refer to other weights
            still = []
            for spec in pending:
                if spec.default is None:
                    raise InvalidParameterError(
                        f"missing weight {spec.name!r}; pass it, e.g. {spec.name}=1.0"
                    )
                if isinstance(spec.default, str):
                    if spec.default in resolved:
                        resolved[spec.name] = resolved[spec.default]
                    elif spec.default not in unknown:
                        still.append(spec)
                else:
                    resolved[spec.name] = float(spec.default)
            pending = still
        if pending:
            raise InvalidParameterError(f"circular weight defaults: {[s.name for s in pending]}")
        return {name: resolved[name] for name in self.weights if name in resolved}

    def sufficient_weights(self, **objective_weights: float) -> dict[str, float]:
        """Penalty weights under which every minimum of the BQM is feasible.

        ``objective_weights`` are the values of the weights that multiply objective terms
        (``mu * U.sum()``), their defaults where omitted: the bound depends on them.

        Proved by one flip (see ``modeling/_penalty_weights.py``): each weight is above the most
        the rest of the energy can gain from breaking one of its constraints. Any weight may
        also be given as ``"sufficient"`` (``to_bqm(lam="sufficient")``, ``solve``,
        ``factorize(weights=...)``, ``--weight lam=sufficient``). Sufficient, not tight: the
        paper's ``lam = 1`` is smaller and usually works, without this guarantee.

        >>> import numpy as np
        >>> from bmfdsl import compile_model
        >>> compiled = compile_model("formulation1", np.ones((3, 4)), 2)
        >>> compiled.sufficient_weights()         # lam > 2r - 1 with 0/1 data
        {'lam': 3.003}
        """
        values = self._resolved(
            {k: v for k, v in objective_weights.items() if k in self.objective_weights},
            unknown=set(self.weights) - set(self.objective_weights),
        )
        key = tuple(sorted(values.items()))
        if key not in self._sufficient:
            self._sufficient[key] = sufficient_weights(self.declaration, values)
        return dict(self._sufficient[key])

    def to_bqm(self, **weights: Any) -> dimod.BinaryQuadraticModel:
        """The BQM for these penalty weights.

        >>> import numpy as np
        >>> from bmfdsl import compile_model
        >>> compiled = compile_model("formulation1", np.array([[1, 1], [0, 1]]), 1)
        >>> bqm = compiled.to_bqm(lam=2.0)
        >>> bqm.num_variables, float(bqm.energy(compiled.encode([[1], [0]], [[1], [1]])))
        (8, 1.0)
        """
        resolved = self.resolve_weights(**weights)
        return self.lowered.terms.to_bqm(resolved, self.lowered.labels)

    def to_pyqubo(self) -> Any:
        """The same model as a PyQUBO Hamiltonian: the reference semantics.

        The objective plus one ``Constraint(Placeholder(weight) * penalty, label=group)`` per
        group; ``to_pyqubo().compile().to_bqm(feed_dict=weights)`` equals ``to_bqm(**weights)``.
        Meant for checking and small models: PyQUBO is slow on large ones.
        """
        from bmfdsl.modeling._pyqubo_twin import hamiltonian

        return hamiltonian(self.declaration)

    # -- encode / decode -------------------------------------------------------------------
    def _check_factor(self, X: Any, rows: int, name: str) -> np.ndarray:
        array = np.asarray(X)
        if array.shape != (rows, self.rank):
            raise InvalidMatrixError(
                f"{name} must have shape ({rows}, {self.rank}); got {array.shape}"
            )
        if not np.isin(array, (0, 1)).all():
            raise InvalidMatrixError(f"{name} must contain only 0 and 1")
        return array.astype(np.int8)

    def encode_array(self, U: Any, V: Any = None) -> np.ndarray:
        """The feasible assignment for ``(U, V)`` as an ``int8`` vector in ``variables`` order
        (a single-factor model takes ``U`` alone: its ``V`` is ``U``)."""
        m, n = self.A.shape
        U = self._check_factor(U, m, "U")
        if self.single_factor:
            if V is not None and not np.array_equal(self._check_factor(V, n, "V"), U):
                raise InvalidMatrixError(
                    f"model {self.model_name!r} has one factor (A ≈ U Uᵀ): pass U alone, or "
                    "V equal to U"
                )
            V = U
        elif V is None:
            raise InvalidMatrixError(f"model {self.model_name!r} has two factors: pass U and V")
        V = self._check_factor(V, n, "V")
        lowered = self.lowered
        return lowered.in_bqm_order(lowered.fill(U[None], V[None]))[0]

    def encode(self, U: Any, V: Any = None) -> dict[str, int]:
        """The feasible assignment for ``(U, V)`` (auxiliaries filled in), by label."""
        values = self.encode_array(U, V)
        return dict(zip(self.variables, values.tolist(), strict=True))

    def errors(
        self, U: np.ndarray, V: np.ndarray, weights: Mapping[str, Any] | None = None
    ) -> np.ndarray:
        """The model's error metric for stacked ``U`` (S, m, r) and ``V`` (S, n, r).

        The declared structure's error (its product, mask and weights; no L1 term), else the
        declared error function, else the objective at the feasible completion of ``(U, V)``
        (its weighted terms at ``weights``, the defaults where omitted): never at a sample's
        own auxiliaries, which may break their constraints.
        """
        if self.structure is not None:  # built from the model's verified claim
            return self.structure.errors(U, V)
        declaration = self.lowered.declaration
        if declaration.error_function is not None:
            return np.asarray(declaration.error_function(U, V), dtype=float).reshape(U.shape[0])
        X = self.lowered.fill(U, V)
        values = self.resolve_weights(**(weights or {})) if self.objective_weights else {}
        return declaration.objective_value(X, values)

    def decode(self, sampleset: dimod.SampleSet, **weights: Any) -> list[DecodedSample]:
        """Decode every sample into ``U``, ``V``, error, energy and broken constraints.

        Samples over only the model's ``U`` and ``V`` variables (from a structure-aware
        solver) get their feasible completion. ``energy`` is recomputed: the BQM energy at
        ``weights`` (the model's defaults where omitted) of the decoded assignment. Order:
        feasible first, then the model's error (see :meth:`errors`), then energy.
        """
        if self._lowered is None and self.structure is not None:
            decoded = self._decode_structured(sampleset, self.resolve_weights(**weights))
            if decoded is not None:
                return decoded
        lowered = self.lowered
        samples = _columns_in_order(sampleset, lowered.labels, lowered.layout)
        occurrences = np.asarray(sampleset.record.num_occurrences)
        U = samples[:, lowered.layout.u_index]
        V = samples[:, lowered.layout.v_index]
        if _is_factor_only(sampleset, lowered.layout):
            X = lowered.fill(U, V)
            samples = lowered.in_bqm_order(X)
        else:
            X = lowered.full_samples(samples)
        resolved = self.resolve_weights(**weights)
        energies = lowered.terms.energies(samples, resolved)
        errors = self.errors(U, V, resolved)
        broken = lowered.broken(X)
        total_broken = sum(broken.values(), np.zeros(len(errors), dtype=np.int64))
        # rank by the model's objective: its error, plus an L1 term where it declares one
        # (as the structure-aware decode below ranks; the sample still reports its error)
        structure = None if self.structure is None else self.structure.resolved(resolved)
        objectives = errors
        if structure is not None and any(w != 0 for w in structure.l1):
            objectives = structure.objectives(U, V)
        order = np.lexsort((energies, objectives, total_broken > 0))
        return [
            DecodedSample(
                U=U[s].astype(np.int8),
                V=V[s].astype(np.int8),
                energy=float(energies[s]),
                error=_as_number(errors[s]),
                broken={name: int(count[s]) for name, count in broken.items()},
                num_occurrences=int(occurrences[s]),
            )
            for s in order
        ]

    def _decode_structured(
        self, sampleset: dimod.SampleSet, weights: dict[str, float]
    ) -> list[DecodedSample] | None:
        """Decode a structure-aware solver's answer without building the full model.

        The verified claim says a feasible completion's energy is the declared objective
        (error plus L1 terms at ``weights``), so nothing else is needed; ``None`` (decode in
        full) when a sample breaks the claim's row limits (one-hot included), or the set is not
        over the structure's labels. Order: energy, then error.
        """
        structure = self.structure
        assert structure is not None
        labels = structure.labels()
        if list(sampleset.variables) != labels:
            return None
        (m, n), r = structure.shape, structure.rank
        record = np.asarray(sampleset.record.sample, dtype=np.int8)
        U = record[:, : m * r].reshape(-1, m, r)
        V = U if structure.symmetric else record[:, m * r :].reshape(-1, n, r)
        if not all(structure.feasible(u, v) for u, v in zip(U, V, strict=True)):
            return None
        errors = structure.errors(U, V)
        energies = structure.resolved(weights).objectives(U, V)
        order = np.lexsort((errors, energies))
        occurrences = np.asarray(sampleset.record.num_occurrences)
        return [
            DecodedSample(
                U=U[s],
                V=V[s],
                energy=float(energies[s]),
                error=_as_number(errors[s]),
                broken=dict.fromkeys(self.group_weights, 0),
                num_occurrences=int(occurrences[s]),
            )
            for s in order
        ]


def _as_number(value: float) -> Any:
    """Integral errors as ``int`` (plain BMF), others (weighted) as ``float``."""
    nearest = round(float(value))
    return nearest if abs(value - nearest) < 1e-9 else float(value)


def check_weight(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """A weight's value as a float: finite and positive (or 0, with ``allow_zero``: a weight
    of objective terms only, which may switch them off)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(f"weight {name!r} must be a number; got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        wanted = "non-negative" if allow_zero else "positive"
        raise InvalidParameterError(
            f"weight {name!r} must be a finite {wanted} number; got {value}"
            + ("" if allow_zero else " (only weights of objective terms alone may be 0)")
        )
    return value


def _is_sufficient(value: Any) -> bool:
    return isinstance(value, str) and value == SUFFICIENT


def _factor_positions(layout: VariableLayout) -> np.ndarray:
    """The positions of U's and V's variables, each once (V is U in single-factor models)."""
    if layout.single_factor:
        return layout.u_index.ravel()
    return np.concatenate([layout.u_index.ravel(), layout.v_index.ravel()])


def _is_factor_only(sampleset: dimod.SampleSet, layout: VariableLayout) -> bool:
    return len(sampleset.variables) == _factor_positions(layout).size < len(layout.variables)


def _columns_in_order(
    sampleset: dimod.SampleSet, variables: list[str], layout: VariableLayout
) -> np.ndarray:
    """The sample matrix with columns in ``variables`` order (factor-only sets: zeros else)."""
    if not isinstance(sampleset, dimod.SampleSet):
        raise InvalidParameterError(
            f"decode needs a dimod.SampleSet; got {type(sampleset).__name__}"
        )
    record = np.asarray(sampleset.record.sample)
    if sampleset.vartype is dimod.SPIN:
        record = (record + 1) // 2
    labels = list(sampleset.variables)
    if labels == variables:
        return record.astype(np.int8)
    position = {label: index for index, label in enumerate(labels)}
    factor_only = _is_factor_only(sampleset, layout)
    targets = _factor_positions(layout)
    wanted = [variables[int(i)] for i in targets] if factor_only else variables
    missing = [label for label in wanted if label not in position]
    if missing:
        raise InvalidParameterError(
            f"the sample set lacks {len(missing)} model variable(s), e.g. {missing[0]!r}; "
            "was it sampled from this compiled model's BQM?"
        )
    out = np.zeros((record.shape[0], len(variables)), dtype=np.int8)
    columns = np.fromiter((position[label] for label in wanted), dtype=np.int64, count=len(wanted))
    if factor_only:
        out[:, targets] = record[:, columns]
    else:
        out[:] = record[:, columns]
    return out

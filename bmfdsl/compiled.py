"""The compiled model: re-weight to a BQM, encode factors, decode samples.

One :class:`CompiledModel` serves every backend: generic samplers take ``to_bqm(**weights)``,
structure-aware solvers take ``structure``, and both come back through ``decode``.

Two sources produce the QUBO behind a compiled model:

* :class:`PyquboSource` — the declarative truth: the model script's PyQUBO Hamiltonian, compiled
  once; weights are PyQUBO placeholders fed at ``to_bqm`` time.
* :class:`VectorSource` — the numpy fast path for registered models: the same BQM assembled from
  index arrays, built lazily on first use, so a huge model costs nothing until a QUBO is needed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import dimod
import numpy as np

from bmfdsl.dsl import ModelBuilder, WeightSpec
from bmfdsl.errors import InvalidMatrixError, InvalidParameterError, UnknownNameError
from bmfdsl.result import DecodedSample
from bmfdsl.structure import BMFStructure, OneHotSide

__all__ = ["CompiledModel", "PyquboSource", "QuboTerms", "VariableLayout", "VectorSource"]


@dataclass
class VariableLayout:
    """Where every variable of interest sits in ``variables`` (numpy index arrays).

    ``product_groups`` maps a group to its ``(z, a, b)`` position arrays (``z = a*b``), in
    declaration order so auxiliaries of auxiliaries can be filled in turn; ``one_hot_groups``
    maps a group to a ``rows x r`` position array.
    """

    variables: list[str]
    u_index: np.ndarray
    v_index: np.ndarray
    product_groups: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=dict
    )
    one_hot_groups: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_labels(
        cls,
        variables: list[str],
        u_labels: np.ndarray,
        v_labels: np.ndarray,
        product_labels: Mapping[str, list[tuple[str, str, str]]],
        one_hot_labels: Mapping[str, list[list[str]]],
    ) -> VariableLayout:
        """Build the index arrays from variable labels."""
        position = {label: index for index, label in enumerate(variables)}

        def lookup(labels: Any) -> np.ndarray:
            flat = np.asarray(labels, dtype=object).ravel()
            out = np.fromiter((position[label] for label in flat), dtype=np.int64, count=flat.size)
            return out.reshape(np.shape(labels))

        products = {}
        for name, triples in product_labels.items():
            table = lookup(triples).reshape(-1, 3)
            products[name] = (table[:, 0], table[:, 1], table[:, 2])
        return cls(
            variables=variables,
            u_index=lookup(u_labels),
            v_index=lookup(v_labels),
            product_groups=products,
            one_hot_groups={name: lookup(rows) for name, rows in one_hot_labels.items()},
        )


@dataclass
class QuboTerms:
    """A BQM that is linear in the weights: ``Σ_w weight_w · terms_w`` (``w = ""``: constant).

    All parts share the ``(row, col)`` arrays so re-weighting is a few vector operations.
    """

    num_variables: int
    row: np.ndarray
    col: np.ndarray
    linear: dict[str, np.ndarray]
    quadratic: dict[str, np.ndarray]
    offset: dict[str, float]

    def combine(self, weights: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray, float]:
        """Linear biases, quadratic biases and offset for one weight setting."""
        factors = {"": 1.0, **weights}
        linear = np.zeros(self.num_variables)
        quadratic = np.zeros(self.row.size)
        offset = 0.0
        for key, factor in factors.items():
            if key in self.linear:
                linear += factor * self.linear[key]
            if key in self.quadratic:
                quadratic += factor * self.quadratic[key]
            offset += factor * self.offset.get(key, 0.0)
        return linear, quadratic, offset


class QuboSource(Protocol):
    """Where a compiled model's QUBO comes from."""

    @property
    def layout(self) -> VariableLayout:
        """The variable labels and index arrays."""
        ...

    def to_bqm(self, weights: Mapping[str, float]) -> dimod.BinaryQuadraticModel:
        """The BQM for resolved weights."""
        ...


def compile_hamiltonian(hamiltonian: Any) -> Any:
    """PyQUBO ``compile()``; a seam so tests can count compilations."""
    return hamiltonian.compile()


class PyquboSource:
    """The model script's PyQUBO Hamiltonian, compiled once at construction."""

    def __init__(self, builder: ModelBuilder) -> None:
        self.model = compile_hamiltonian(builder.hamiltonian())
        variables = sorted(self.model.variables)
        known = set(variables)
        u_name, v_name = builder.factor_names or ("U", "V")
        m, n = builder.A.shape
        r = builder.rank
        u_labels = np.array([[f"{u_name}[{i}][{k}]" for k in range(r)] for i in range(m)])
        v_labels = np.array([[f"{v_name}[{j}][{k}]" for k in range(r)] for j in range(n)])
        # A factor entry that appears in no term is still a variable of the model.
        missing = [label for label in (*u_labels.ravel(), *v_labels.ravel()) if label not in known]
        self._extra = missing
        self._layout = VariableLayout.from_labels(
            variables + missing,
            u_labels,
            v_labels,
            {g.name: g.triples for g in builder.groups.values() if g.kind == "product"},
            {g.name: g.rows for g in builder.groups.values() if g.kind == "one_hot"},
        )

    @property
    def layout(self) -> VariableLayout:
        return self._layout

    def to_bqm(self, weights: Mapping[str, float]) -> dimod.BinaryQuadraticModel:
        bqm = self.model.to_bqm(feed_dict=dict(weights))
        for label in self._extra:
            bqm.add_variable(label, 0.0)
        return bqm


class VectorSource:
    """A registered model's BQM assembled with numpy; built on first use and cached."""

    def __init__(self, build: Callable[[], tuple[VariableLayout, QuboTerms]]) -> None:
        self._build = build
        self._built: tuple[VariableLayout, QuboTerms] | None = None

    def _get(self) -> tuple[VariableLayout, QuboTerms]:
        if self._built is None:
            self._built = self._build()
        return self._built

    @property
    def layout(self) -> VariableLayout:
        return self._get()[0]

    def to_bqm(self, weights: Mapping[str, float]) -> dimod.BinaryQuadraticModel:
        layout, terms = self._get()
        linear, quadratic, offset = terms.combine(weights)
        return dimod.BinaryQuadraticModel.from_numpy_vectors(
            linear,
            (terms.row, terms.col, quadratic),
            offset,
            dimod.BINARY,
            variable_order=layout.variables,
        )


class CompiledModel:
    """A model compiled for one data matrix and rank; re-weighted without recompiling.

    Create it with :func:`bmfdsl.compile_model`.

    Attributes:
        model_name: the registered name or the script path.
        A: the data matrix (``int8``).
        rank: the target rank.
        one_hot: ``"U"``, ``"V"`` or ``None``.
        weights: the penalty weights the model declares, with their defaults.
        group_weights: constraint group name -> the weight it uses.
        structure: a :class:`~bmfdsl.structure.BMFStructure` for plain BMF models, else ``None``.
    """

    def __init__(
        self,
        *,
        model_name: str,
        A: np.ndarray,
        rank: int,
        one_hot: OneHotSide | None,
        weights: Mapping[str, WeightSpec],
        group_weights: Mapping[str, str],
        structure: BMFStructure | None,
        source: QuboSource,
    ) -> None:
        self.model_name = model_name
        self.A = A
        self.rank = rank
        self.one_hot = one_hot
        self.weights = dict(weights)
        self.group_weights = dict(group_weights)
        self.structure = structure
        self.source = source

    def __repr__(self) -> str:
        m, n = self.A.shape
        return (
            f"CompiledModel({self.model_name!r}, A={m}x{n}, rank={self.rank}, "
            f"one_hot={self.one_hot!r}, weights={list(self.weight_names)})"
        )

    # -- variables -------------------------------------------------------------------------
    @property
    def weight_names(self) -> tuple[str, ...]:
        """Names of the penalty weights ``to_bqm`` takes."""
        return tuple(self.weights)

    @property
    def layout(self) -> VariableLayout:
        """Variable labels and index arrays (built on first use for the fast path)."""
        return self.source.layout

    @property
    def variables(self) -> list[str]:
        """Every variable label, in the model's canonical order."""
        return self.layout.variables

    @property
    def num_variables(self) -> int:
        """The number of binary variables of the QUBO."""
        return len(self.layout.variables)

    # -- weights ---------------------------------------------------------------------------
    def resolve_weights(self, **weights: Any) -> dict[str, float]:
        """Check weight names and values and fill in defaults.

        Raises:
            UnknownNameError: a name the model does not declare.
            InvalidParameterError: a required weight is missing, or a value is not a finite
                positive number.
        """
        for name in weights:
            if name not in self.weights:
                raise UnknownNameError(
                    "weight", name, self.weights, hint=f"model {self.model_name!r} declares these"
                )
        resolved: dict[str, float] = {}
        for name, value in weights.items():
            resolved[name] = _check_weight(name, value)
        pending = [spec for spec in self.weights.values() if spec.name not in resolved]
        for _ in range(len(pending) + 1):  # resolve defaults that refer to other weights
            still = []
            for spec in pending:
                if spec.default is None:
                    raise InvalidParameterError(
                        f"missing weight {spec.name!r}; pass it, e.g. to_bqm({spec.name}=1.0)"
                    )
                if isinstance(spec.default, str):
                    if spec.default in resolved:
                        resolved[spec.name] = resolved[spec.default]
                    else:
                        still.append(spec)
                else:
                    resolved[spec.name] = float(spec.default)
            pending = still
        if pending:
            raise InvalidParameterError(f"circular weight defaults: {[s.name for s in pending]}")
        return {name: resolved[name] for name in self.weights}

    def to_bqm(self, **weights: Any) -> dimod.BinaryQuadraticModel:
        """The BQM for these penalty weights; on feasible points energy == ``||A - UVᵀ||²_F``.

        >>> import numpy as np
        >>> from bmfdsl import compile_model
        >>> compiled = compile_model("formulation1", np.array([[1, 1], [0, 1]]), 1)
        >>> bqm = compiled.to_bqm(lam=2.0)
        >>> bqm.num_variables, float(bqm.energy(compiled.encode([[1], [0]], [[1], [1]])))
        (8, 1.0)
        """
        return self.source.to_bqm(self.resolve_weights(**weights))

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

    def encode_array(self, U: Any, V: Any) -> np.ndarray:
        """The full assignment for ``(U, V)`` as an ``int8`` vector in ``variables`` order."""
        m, n = self.A.shape
        U = self._check_factor(U, m, "U")
        V = self._check_factor(V, n, "V")
        layout = self.layout
        values = np.zeros(len(layout.variables), dtype=np.int8)
        values[layout.u_index] = U
        values[layout.v_index] = V
        for z, a, b in layout.product_groups.values():
            values[z] = values[a] * values[b]
        return values

    def encode(self, U: Any, V: Any) -> dict[str, int]:
        """The full feasible assignment for ``(U, V)`` (auxiliaries filled in), by label."""
        values = self.encode_array(U, V)
        return dict(zip(self.layout.variables, values.tolist(), strict=True))

    def decode(self, sampleset: dimod.SampleSet) -> list[DecodedSample]:
        """Decode every sample into ``U``, ``V``, error and broken constraints; best first.

        Best means: no broken constraint first, then lowest error, then lowest energy. Uses
        numpy index arrays (never PyQUBO's per-sample decoder).
        """
        layout = self.layout
        samples = _columns_in_order(sampleset, layout.variables)
        energies = np.asarray(sampleset.record.energy, dtype=float)
        occurrences = np.asarray(sampleset.record.num_occurrences)
        U = samples[:, layout.u_index]  # (S, m, r)
        V = samples[:, layout.v_index]  # (S, n, r)
        product = np.einsum("sik,sjk->sij", U.astype(np.int32), V.astype(np.int32))
        residual = self.A.astype(np.int32)[None] - product
        errors = np.einsum("sij,sij->s", residual, residual)
        broken: dict[str, np.ndarray] = {}
        for name, (z, a, b) in layout.product_groups.items():
            broken[name] = (samples[:, z] != samples[:, a] * samples[:, b]).sum(axis=1)
        for name, rows in layout.one_hot_groups.items():
            broken[name] = (samples[:, rows].sum(axis=2) != 1).sum(axis=1)
        total_broken = sum(broken.values(), np.zeros(len(errors), dtype=np.int64))
        order = np.lexsort((energies, errors, total_broken > 0))
        return [
            DecodedSample(
                U=U[s].astype(np.int8),
                V=V[s].astype(np.int8),
                energy=float(energies[s]),
                error=int(errors[s]),
                broken={name: int(count[s]) for name, count in broken.items()},
                num_occurrences=int(occurrences[s]),
            )
            for s in order
        ]


def _check_weight(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(f"weight {name!r} must be a number; got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise InvalidParameterError(
            f"weight {name!r} must be a finite positive number; got {value}"
        )
    return value


def _columns_in_order(sampleset: dimod.SampleSet, variables: list[str]) -> np.ndarray:
    """The sample matrix with columns rearranged into ``variables`` order."""
    record = np.asarray(sampleset.record.sample)
    if sampleset.vartype is dimod.SPIN:
        record = (record + 1) // 2
    labels = list(sampleset.variables)
    if labels == variables:
        return record
    position = {label: index for index, label in enumerate(labels)}
    missing = [label for label in variables if label not in position]
    if missing:
        raise InvalidParameterError(
            f"the sample set lacks {len(missing)} model variable(s), e.g. {missing[0]!r}; "
            "was it sampled from this compiled model's BQM?"
        )
    columns = np.fromiter((position[label] for label in variables), dtype=np.int64)
    return record[:, columns]

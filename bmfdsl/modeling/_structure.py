"""What a structure-aware solver needs to know about a compiled model, and its interface."""

from __future__ import annotations

import abc
import functools
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import dimod
import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.linalg import product_squared_error, squared_error, weighted_squared_error

OneHotSide = Literal["U", "V"]
#: Ones allowed per row of a factor: ``(at least, at most)``.
RowLimits = tuple[int, int]


@dataclass(frozen=True)
class BMFStructure:
    """A member of the BMF family: minimise
    ``Σ_ij w_ij m_ij (a_ij - (U ∘ V)_ij)² + l1_U Σ U + l1_V Σ V`` over 0/1 U, V.

    A model claims this structure with ``model.declare_bmf(...)``; ``compile_model`` checks
    that on feasible assignments its energy equals this objective before a structure-aware
    solver may use it. ``product`` is ``"sum"`` (the integer ``U Vᵀ``), ``"or"`` (Boolean)
    or ``"xor"`` (GF(2)). ``one_hot`` names the factor whose rows must each hold exactly one 1
    (``"V"``: every column of A joins exactly one cluster), or is ``None``; ``row_limits``
    bounds the ones of each row of ``U`` and ``V`` (``(at least, at most)`` or ``None``).
    ``l1`` is the weight of the L1 term of ``U`` and of ``V``: a number, or the name of a model
    weight (``resolved`` turns names into values). ``mask`` (1 = observed) and
    ``entry_weights`` default to all ones. ``factor_names`` are the model's names of U and V:
    the labels of a structured SampleSet are ``U[i][k]`` and ``V[j][k]`` with them.

    :meth:`error` is the model's error (the loss, without the L1 term); :meth:`objective`
    adds the L1 term: it is what the energy of a feasible point equals.
    """

    A: np.ndarray
    rank: int
    one_hot: OneHotSide | None = None
    mask: np.ndarray | None = None
    entry_weights: np.ndarray | None = None
    factor_names: tuple[str, str] = ("U", "V")
    product: str = "sum"
    l1: tuple[float | str, float | str] = (0.0, 0.0)
    row_limits: tuple[RowLimits | None, RowLimits | None] = (None, None)
    symmetric: bool = False  # one factor: V is U (A ≈ U ∘ Uᵀ, A square)

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, n)`` of the data matrix."""
        return (int(self.A.shape[0]), int(self.A.shape[1]))

    @property
    def is_plain(self) -> bool:
        """True without a mask or entry weights: ``||A - U Vᵀ||²_F``."""
        return self.mask is None and self.entry_weights is None

    @property
    def is_integer_bmf(self) -> bool:
        """The integer product with no factor penalty beyond ``one_hot``: what the plain and
        weighted portfolios of ``native`` solve (the rest of the family goes to its row
        updates)."""
        return (
            self.product == "sum"
            and not self.symmetric
            and self.row_limits == (None, None)
            and all(isinstance(w, int | float) and w == 0 for w in self.l1)
        )

    def limits(self, side: OneHotSide) -> RowLimits | None:
        """Ones allowed per row of ``side`` (one-hot: ``(1, 1)``), or ``None`` (any)."""
        own = self.row_limits[0 if side == "U" else 1]
        if self.one_hot == side:
            return (1, 1) if own is None else (max(1, own[0]), min(1, own[1]))
        return own

    def resolved(self, weights: dict[str, float]) -> BMFStructure:
        """This structure with named L1 weights replaced by their values in ``weights``."""
        if all(not isinstance(w, str) for w in self.l1):
            return self
        values = tuple(weights[w] if isinstance(w, str) else w for w in self.l1)
        return replace(self, l1=values)  # type: ignore[arg-type]

    def l1_values(self) -> tuple[float, float]:
        """The L1 weights as numbers (an unresolved name is an error that says what to do)."""
        names = [w for w in self.l1 if isinstance(w, str)]
        if names:
            raise InvalidParameterError(
                f"the L1 weight {names[0]!r} of this structure is a model weight: take "
                "compiled.structure.resolved(compiled.resolve_weights(...)) first"
            )
        return float(self.l1[0]), float(self.l1[1])

    @property
    def effective_weights(self) -> np.ndarray | None:
        """``mask * entry_weights``: each entry's weight in the objective, 0 where unobserved
        (None when both are absent)."""
        if self.is_plain:
            return None
        out = np.ones(self.shape)
        if self.mask is not None:
            out = out * self.mask
        if self.entry_weights is not None:
            out = out * self.entry_weights
        return out

    def labels(self) -> list[str]:
        """``U`` then ``V`` labels (row-major), the columns of a structured SampleSet (``U``
        alone when ``symmetric``)."""
        (m, n), r = self.shape, self.rank
        labels = list(_factor_labels(m, n, r, *self.factor_names))
        return labels[: m * r] if self.symmetric else labels

    def error(self, U: np.ndarray, V: np.ndarray) -> float:
        """The model's error at one ``(U, V)``: the (masked, weighted) loss under its product,
        in row chunks (no ``m x n`` temporaries)."""
        if self.product != "sum":
            return product_squared_error(self.A, U, V, self.product, self.effective_weights)
        if self.is_plain:
            return float(squared_error(self.A, U, V))
        weights = self.effective_weights
        assert weights is not None
        return weighted_squared_error(self.A, U, V, weights)

    def errors(self, U: np.ndarray, V: np.ndarray) -> np.ndarray:
        """The error for stacked ``U`` (S, m, r) and ``V`` (S, n, r): shape (S,)."""
        return np.array([self.error(u, v) for u, v in zip(U, V, strict=True)], dtype=float)

    def objective(self, U: np.ndarray, V: np.ndarray) -> float:
        """The error plus the L1 term: the energy of the feasible point of ``(U, V)``."""
        l1_u, l1_v = self.l1_values()
        penalty = l1_u * float(np.sum(U)) + l1_v * float(np.sum(V))
        return self.error(U, V) + penalty

    def objectives(self, U: np.ndarray, V: np.ndarray) -> np.ndarray:
        """:meth:`objective` for stacked ``U`` and ``V``: shape (S,)."""
        return np.array([self.objective(u, v) for u, v in zip(U, V, strict=True)], dtype=float)

    def feasible(self, U: np.ndarray, V: np.ndarray) -> bool:
        """Whether every row of ``U`` and ``V`` holds the ones its limits allow."""
        for side, factor in (("U", U), ("V", V)):
            limits = self.limits(side)  # type: ignore[arg-type]
            if limits is not None:
                ones = np.asarray(factor).sum(axis=-1)
                if ((ones < limits[0]) | (ones > limits[1])).any():
                    return False
        return True

    def sampleset(
        self,
        solutions: list[tuple[np.ndarray, np.ndarray]],
        errors: list[float] | None = None,
        **info: Any,
    ) -> dimod.SampleSet:
        """A SampleSet over ``labels()``; ``energy`` is each solution's objective (``errors``
        when the solver already knows them exactly, else computed with the L1 term)."""
        rows = [
            (U.ravel() if self.symmetric else np.concatenate([U.ravel(), V.ravel()])).astype(
                np.int8
            )
            for U, V in solutions
        ]
        samples = np.array(rows, dtype=np.int8).reshape(len(rows), -1)
        energies = errors if errors is not None else [self.objective(U, V) for U, V in solutions]
        return dimod.SampleSet.from_samples(
            (samples, self.labels()), dimod.BINARY, energy=energies, info=info, sort_labels=False
        )


@functools.lru_cache(maxsize=8)
def _factor_labels(m: int, n: int, r: int, u_name: str, v_name: str) -> tuple[str, ...]:
    ranks = [f"[{k}]" for k in range(r)]
    return tuple(
        [f"{u_name}[{i}]{k}" for i in range(m) for k in ranks]
        + [f"{v_name}[{j}]{k}" for j in range(n) for k in ranks]
    )


class StructuredSampler(abc.ABC):
    """A solver that takes a :class:`BMFStructure` instead of a BQM (like dimod's Sampler).

    ``sample_bmf`` returns a ``dimod.SampleSet`` over the structure's ``U`` and ``V`` labels;
    ``compiled.decode`` completes the auxiliaries and recomputes energies, so results come
    back the same way as from any BQM sampler. ``parameters`` lists the keywords of
    ``sample_bmf``; ``properties`` describes the solver.
    """

    name: ClassVar[str] = "structured"

    @property
    @abc.abstractmethod
    def parameters(self) -> dict[str, list[str]]:
        """Keyword parameters ``sample_bmf`` accepts (dimod's convention)."""

    @property
    def properties(self) -> dict[str, Any]:
        """A description of the solver."""
        return {"name": self.name}

    @abc.abstractmethod
    def sample_bmf(self, structure: BMFStructure, *args: Any, **parameters: Any) -> dimod.SampleSet:
        """Solve the BMF of ``structure``; every sample is feasible for its one-hot side."""

"""What a structure-aware solver needs to know about a compiled model, and its interface."""

from __future__ import annotations

import abc
import functools
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import dimod
import numpy as np

from bmfdsl.linalg import squared_error, weighted_squared_error

OneHotSide = Literal["U", "V"]


@dataclass(frozen=True)
class BMFStructure:
    """A (masked, weighted) BMF: minimise ``Σ_ij w_ij m_ij (a_ij - (U Vᵀ)_ij)²`` over 0/1 U, V.

    A model claims this structure with ``model.declare_bmf(...)``; ``compile_model`` checks
    that on feasible assignments its energy equals this objective before a structure-aware
    solver may use it. ``one_hot`` names the factor whose rows must each hold exactly one 1
    (``"V"``: every column of A joins exactly one cluster), or is ``None``. ``mask`` (1 =
    observed) and ``entry_weights`` default to all ones. ``factor_names`` are the model's names of
    U and V: the labels of a structured SampleSet are ``U[i][k]`` and ``V[j][k]`` with them.
    """

    A: np.ndarray
    rank: int
    one_hot: OneHotSide | None = None
    mask: np.ndarray | None = None
    entry_weights: np.ndarray | None = None
    factor_names: tuple[str, str] = ("U", "V")

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, n)`` of the data matrix."""
        return (int(self.A.shape[0]), int(self.A.shape[1]))

    @property
    def is_plain(self) -> bool:
        """True without a mask or entry weights: ``||A - U Vᵀ||²_F``."""
        return self.mask is None and self.entry_weights is None

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
        """``U`` then ``V`` labels (row-major), the columns of a structured SampleSet."""
        (m, n), r = self.shape, self.rank
        return list(_factor_labels(m, n, r, *self.factor_names))

    def error(self, U: np.ndarray, V: np.ndarray) -> float:
        """The objective at one ``(U, V)``, in row chunks (no ``m x n`` temporaries)."""
        if self.is_plain:
            return float(squared_error(self.A, U, V))
        weights = self.effective_weights
        assert weights is not None
        return weighted_squared_error(self.A, U, V, weights)

    def errors(self, U: np.ndarray, V: np.ndarray) -> np.ndarray:
        """The objective for stacked ``U`` (S, m, r) and ``V`` (S, n, r): shape (S,)."""
        return np.array([self.error(u, v) for u, v in zip(U, V, strict=True)], dtype=float)

    def sampleset(
        self,
        solutions: list[tuple[np.ndarray, np.ndarray]],
        errors: list[float] | None = None,
        **info: Any,
    ) -> dimod.SampleSet:
        """A SampleSet over ``labels()``; ``energy`` is each solution's objective (``errors``
        when the solver already knows them exactly, else computed)."""
        rows = [np.concatenate([U.ravel(), V.ravel()]).astype(np.int8) for U, V in solutions]
        samples = np.array(rows, dtype=np.int8).reshape(len(rows), -1)
        energies = errors if errors is not None else [self.error(U, V) for U, V in solutions]
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

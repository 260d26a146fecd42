"""Result types: one decoded sample of a QUBO solve, and a finished factorization."""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "DecodedSample",
    "Factorization",
    "gap",
    "to_jsonable",
]


def gap(error: int, lower_bound: int) -> float:
    """The proven relative gap ``(error - lower_bound) / error`` (0 when ``error`` is 0).

    >>> gap(10, 10), gap(10, 0)
    (0.0, 1.0)
    """
    if error <= 0:
        return 0.0
    return max(0.0, (error - lower_bound) / error)


@dataclass(frozen=True)
class DecodedSample:
    """One sample of a solver, decoded into the factor matrices.

    ``energy`` is the BQM energy of the decoded assignment, recomputed at the weights used
    (a structure-aware solver's U, V get their feasible completion first); ``error`` is the
    model's error metric recomputed from U, V (``||A - UVᵀ||²_F`` for plain BMF; a float for
    weighted models); ``broken`` counts violated constraints per constraint group.
    """

    U: np.ndarray
    V: np.ndarray
    energy: float
    error: int | float
    broken: dict[str, int]
    num_occurrences: int = 1

    @property
    def feasible(self) -> bool:
        """True when no constraint is broken."""
        return not any(self.broken.values())


@dataclass
class Factorization:
    """A finished binary matrix factorization ``A ≈ U Vᵀ``.

    Attributes:
        U: ``m x r`` 0/1 integer array.
        V: ``n x r`` 0/1 integer array.
        error: ``||A - UVᵀ||²_F``.
        relative_error: ``error / ||A||²_F`` (see :func:`relative_error` for an empty A).
        broken_constraints: violated constraints per group in the solver's raw answer.
        info: method, backend, per-stage timings in seconds, energies, certificates.
        lower_bound: a proven lower bound on the optimal error of this problem (see
            :mod:`bmfdsl.pipeline._bounds`; ``info["lower_bound"]`` says where it came from).
    """

    U: np.ndarray
    V: np.ndarray
    error: int
    relative_error: float
    broken_constraints: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    lower_bound: int = 0

    @property
    def gap(self) -> float:
        """The proven relative gap ``(error - lower_bound) / error`` (0 when error is 0).

        >>> Factorization(np.zeros((2, 1)), np.zeros((2, 1)), 4, 1.0, lower_bound=3).gap
        0.25
        """
        return gap(self.error, self.lower_bound)

    @property
    def certified_optimal(self) -> bool:
        """True when the error is proven optimal (it equals the lower bound)."""
        return self.error <= self.lower_bound

    @property
    def rank(self) -> int:
        """The number of columns of U and V."""
        return int(self.U.shape[1])

    def reconstruct(self) -> np.ndarray:
        """The Boolean-free product ``U Vᵀ`` as an integer array."""
        return np.asarray(self.U, dtype=np.int64) @ np.asarray(self.V, dtype=np.int64).T

    def plot(self, A: Any = None, **options: Any) -> Any:
        """A matplotlib figure of ``A``, ``U Vᵀ`` and the residual, rows and columns ordered
        by their factor codes, with the factors as strips (needs ``pip install 'bmfdsl[plot]'``).

        See :func:`bmfdsl.apps.plot_factorization` for ``options``; save the figure with
        ``figure.savefig("out.png")``.
        """
        # drawing lives in the apps layer; it is loaded by name, as the registries load
        # adapters, so that this leaf imports nothing above it
        apps = importlib.import_module("bmfdsl.apps")
        return apps.plot_factorization(self, A, **options)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary (factors as nested lists)."""
        return {
            "U": self.U.tolist(),
            "V": self.V.tolist(),
            "error": int(self.error),
            "relative_error": float(self.relative_error),
            "broken_constraints": dict(self.broken_constraints),
            "lower_bound": int(self.lower_bound),
            "gap": self.gap,
            "certified_optimal": self.certified_optimal,
            "info": self.info,
        }


def to_jsonable(value: Any) -> Any:
    """A JSON-friendly copy of solver or run info.

    Numpy scalars become Python values, small arrays lists, non-finite floats strings.

    >>> to_jsonable({"a": np.int64(2), "b": (np.float32(0.5), float("inf"))})
    {'a': 2, 'b': [0.5, 'inf']}
    """
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 64 else f"<array {value.shape}>"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)

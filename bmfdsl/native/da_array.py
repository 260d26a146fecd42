"""The Digital Annealer algorithm for many runs at once, as array code (numpy or CuPy).

The numba kernel of :mod:`bmfdsl.native.da_kernel` runs one run at a time and walks the
trials lazily; that is the fastest way on a CPU core. A GPU needs the opposite: every
iteration of *all* runs as a handful of whole-array operations, so each iteration is a few
kernel launches over an ``R x N`` array (runs x variables) instead of ``R`` serial loops. This
module is that formulation, written against an array module ``xp`` (numpy or cupy): it runs
on a GPU with CuPy and is tested on the CPU with numpy.

Per iteration and for every run at once: flip energies ``ΔE = (1 - 2x) g`` from the local
fields ``g = h + Qx``; each trial accepted with probability ``min(1, exp(-(ΔE - E_off)/T))``
(trials with an acceptance probability below ``exp(-30)`` are never accepted, as in the numba
kernel); one accepted trial per run chosen uniformly; its flip applied with the row update
``g += (1 - 2 x_i) Q[i]`` (a gather of one dense row per run). Runs without an accepted trial
raise their escape offset ``E_off`` instead (reset to 0 on acceptance). Couplings are dense,
which is what a GPU wants; :func:`dense_couplings` refuses matrices above 4 GiB.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import scipy.sparse

from bmfdsl.errors import BackendUnavailableError, InvalidParameterError

__all__ = [
    "ARRAY_DEVICES",
    "MAX_DENSE_BYTES",
    "ArrayRuns",
    "available_array_devices",
    "da_anneal_array",
    "dense_couplings",
    "get_array_module",
]

ARRAY_DEVICES = ("numpy", "cupy", "gpu")
MAX_DENSE_BYTES = 4 * 2**30
_CUTOFF = 30.0
_GPU_HINT = 'pip install "bmfdsl[gpu]"'


def get_array_module(device: str) -> ModuleType:
    """The array module for ``device``: ``"numpy"``, or ``"cupy"``/``"gpu"`` (CuPy, imported
    lazily; raises :class:`~bmfdsl.errors.BackendUnavailableError` without CuPy or a usable
    CUDA device).

    >>> get_array_module("numpy").__name__
    'numpy'
    """
    if device == "numpy":
        return np
    if device not in ("cupy", "gpu"):
        raise InvalidParameterError(
            f"array device must be one of {list(ARRAY_DEVICES)}; got {device!r}"
        )
    try:
        cupy = importlib.import_module("cupy")
    except ImportError as exc:
        raise BackendUnavailableError(
            f"device {device!r} needs CuPy and a CUDA GPU: {_GPU_HINT}"
        ) from exc
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError without a driver; its class lives in cupy
        raise BackendUnavailableError(
            f"device {device!r}: CuPy is installed but no CUDA device is usable ({exc}); "
            f"check the driver and the CuPy build ({_GPU_HINT})"
        ) from exc
    if count < 1:
        raise BackendUnavailableError(
            f"device {device!r}: CuPy is installed but finds no CUDA device ({_GPU_HINT})"
        )
    return cupy


def available_array_devices() -> list[str]:
    """Array devices whose module is importable (``"gpu"`` when CuPy is installed; whether a
    CUDA device is usable is only checked when it is used)."""
    found = ["numpy"]
    if importlib.util.find_spec("cupy") is not None:
        found.append("gpu")
    return found


def dense_couplings(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, num_variables: int
) -> np.ndarray:
    """The dense ``N x N`` coupling matrix of symmetric CSR couplings, refusing above
    :data:`MAX_DENSE_BYTES`.

    >>> dense_couplings(np.array([0, 1, 2]), np.array([1, 0]), np.array([2.0, 2.0]), 2)
    array([[0., 2.],
           [2., 0.]])
    """
    _check_dense_size(num_variables)
    matrix = scipy.sparse.csr_matrix((data, indices, indptr), shape=(num_variables,) * 2)
    return np.ascontiguousarray(matrix.toarray(), dtype=np.float64)


def _check_dense_size(num_variables: int) -> None:
    size = 8 * num_variables * num_variables
    if size > MAX_DENSE_BYTES:
        raise InvalidParameterError(
            f"the array path holds the couplings densely: {num_variables} variables need "
            f"{size / 2**30:.1f} GiB (limit {MAX_DENSE_BYTES / 2**30:.0f} GiB); "
            "use device='cpu' (sparse couplings)"
        )


def _uniform_source(xp: ModuleType, seed: int | None) -> Callable[[tuple[int, ...]], Any]:
    """``shape -> uniform [0, 1) float64 array`` from a generator seeded with ``seed``
    (numpy's and CuPy's ``default_rng`` share this interface, not their streams)."""
    rng = xp.random.default_rng(seed)
    return lambda shape: rng.random(shape)


def _to_host(xp: ModuleType, array: Any) -> np.ndarray:
    return np.asarray(array.get() if xp is not np else array)


class ArrayRuns:
    """The state of ``R`` runs on the array device, advanced in chunks of iterations.

    Holds the states ``x``, local fields ``g``, energies, best states and energies and the
    escape offsets of all runs; :meth:`iterate` continues all of them.
    """

    def __init__(
        self,
        h: np.ndarray,
        Q_dense: np.ndarray,
        states: np.ndarray,
        seed: int | None,
        xp: ModuleType,
    ) -> None:
        n = len(h)
        _check_dense_size(n)
        if Q_dense.shape != (n, n) or states.ndim != 2 or states.shape[1] != n:
            raise InvalidParameterError(
                f"need h of length N, Q_dense N x N and states R x N; got {len(h)}, "
                f"{Q_dense.shape} and {states.shape}"
            )
        self.xp = xp
        self.h = xp.asarray(h, dtype=xp.float64)
        self.Q = xp.asarray(Q_dense, dtype=xp.float64)
        self.x = xp.array(states, dtype=xp.int8)  # a copy: the caller's states stay as given
        xf = self.x.astype(xp.float64)
        self.g = self.h[None, :] + xf @ self.Q
        # E = h.x + x.Q.x / 2 (Q holds each coupling twice)
        self.energy = xf @ self.h + 0.5 * xp.sum(xf * (self.g - self.h[None, :]), axis=1)
        self.best = self.energy.copy()
        self.best_x = self.x.copy()
        self.offset = xp.zeros(len(states), dtype=xp.float64)
        self.rows = xp.arange(len(states))
        self.uniform = _uniform_source(xp, seed)

    def iterate(
        self, temperatures: np.ndarray, temperature_interval: int, offset_increase: float
    ) -> None:
        """Continue every run for ``len(temperatures) * temperature_interval`` iterations."""
        xp = self.xp
        shape = self.x.shape
        for temperature in np.asarray(temperatures, dtype=np.float64):
            beta = 1.0 / float(temperature)
            for _ in range(temperature_interval):
                sign = (1 - 2 * self.x).astype(xp.float64)  # explicit: dtype rules of xp differ
                delta = sign * self.g
                excess = (delta - self.offset[:, None]) * beta
                # clipped so exp never underflows to 0 below the cutoff: u / p stays finite
                p = xp.exp(-xp.clip(excess, 0.0, _CUTOFF))
                u = self.uniform(shape)
                accepted = (u < p) & (excess <= _CUTOFF)
                # given acceptance u / p is uniform on [0, 1) and independent across trials,
                # so its argmax is a uniform pick among the accepted: one draw serves both
                key = xp.where(accepted, u / p, -1.0)
                chosen = xp.argmax(key, axis=1)
                flips = accepted[self.rows, chosen]
                step = xp.where(flips, sign[self.rows, chosen], 0.0)
                self.g += step[:, None] * self.Q[chosen]
                self.energy += xp.where(flips, delta[self.rows, chosen], 0.0)
                self.x[self.rows, chosen] ^= flips.astype(xp.int8)
                self.offset = xp.where(flips, 0.0, self.offset + offset_increase)
                improved = self.energy < self.best - 1e-9
                self.best = xp.where(improved, self.energy, self.best)
                xp.copyto(self.best_x, self.x, where=improved[:, None])

    def synchronize(self) -> None:
        """Wait for queued device work (a no-op with numpy), e.g. before reading the clock."""
        if self.xp is not np:
            self.xp.cuda.get_current_stream().synchronize()

    def result(self, states: np.ndarray) -> np.ndarray:
        """Write each run's best state into ``states`` (host, ``R x N``) and return the best
        energies (without the BQM offset), recomputed exactly from those states."""
        xp = self.xp
        xf = self.best_x.astype(xp.float64)
        energies = xf @ self.h + 0.5 * xp.sum(xf * (xf @ self.Q), axis=1)
        states[:] = _to_host(xp, self.best_x)
        return _to_host(xp, energies).astype(np.float64)


def da_anneal_array(
    h: np.ndarray,
    Q_dense: np.ndarray,
    states: np.ndarray,
    temperatures: np.ndarray,
    temperature_interval: int,
    offset_increase: float,
    seed: int | None,
    xp: ModuleType = np,
) -> np.ndarray:
    """Run one annealing run per row of ``states``, all runs at once (in place: each row ends
    as the run's best state).

    Args:
        h: linear biases (length N, BINARY).
        Q_dense: ``N x N`` symmetric couplings with a zero diagonal (``Q[i, j]`` is the
            coupling of ``i`` and ``j``), e.g. from :func:`dense_couplings`.
        states: ``R x N`` int8 initial states (host array); overwritten with the best states.
        temperatures: the schedule; ``temperatures[t]`` holds for ``temperature_interval``
            iterations.
        temperature_interval: iterations per temperature.
        offset_increase: escape-offset increment per iteration without an accepted flip.
        seed: seeds the array module's generator (numpy and CuPy streams differ).
        xp: the array module (numpy, or cupy from :func:`get_array_module`).

    Returns:
        the best energy of each run (host array, without the BQM offset).

    >>> h = np.array([1.0, -1.0])
    >>> Q = np.array([[0.0, -3.0], [-3.0, 0.0]])
    >>> states = np.zeros((2, 2), dtype=np.int8)
    >>> da_anneal_array(h, Q, states, np.geomspace(2.0, 0.1, 50), 1, 0.1, seed=0)
    array([-3., -3.])
    >>> states
    array([[1, 1],
           [1, 1]], dtype=int8)
    """
    runs = ArrayRuns(h, Q_dense, states, seed, xp)
    runs.iterate(temperatures, temperature_interval, offset_increase)
    return runs.result(states)

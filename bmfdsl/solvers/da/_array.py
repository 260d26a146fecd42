"""The Digital Annealer algorithm for many runs at once, as array code (numpy or CuPy).

The numba kernel of :mod:`bmfdsl.solvers.da._kernel` runs one run at a time and walks the
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
raise their escape offset ``E_off`` instead (reset to 0 on acceptance). These operations hold
the couplings densely; :func:`dense_couplings` refuses matrices above 4 GiB.

On a GPU, :class:`ArrayRuns` iterates with the fused kernel of :mod:`bmfdsl.solvers.da._cuda`
by default (one launch for many iterations of all runs, with sparse couplings: 30-130x faster
than these array operations there on an H100); ``fused=False`` keeps the array operations,
which is how the tests check one against the other.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import scipy.sparse

from bmfdsl.errors import InvalidParameterError
from bmfdsl.linalg import to_host
from bmfdsl.solvers.da._cuda import fused_iterate, run_key

MAX_DENSE_BYTES = 4 * 2**30
_CUTOFF = 30.0


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
            "use device='cpu' or 'gpu' (sparse couplings)"
        )


def _uniform_source(xp: ModuleType, seed: int | None) -> Callable[[tuple[int, ...]], Any]:
    """``shape -> uniform [0, 1) float64 array`` from a generator seeded with ``seed``
    (numpy's and CuPy's ``default_rng`` share this interface, not their streams)."""
    rng = xp.random.default_rng(seed)
    return lambda shape: rng.random(shape)


class ArrayRuns:
    """The state of ``R`` runs on the array device, advanced in chunks of iterations.

    Holds the states ``x``, local fields ``g``, energies, best states and energies and the
    escape offsets of all runs (arrays of ``xp``); :meth:`iterate` continues all of them.
    ``couplings`` is the symmetric ``N x N`` coupling matrix with a zero diagonal, dense or
    scipy sparse. ``fused`` picks the fused CUDA kernel (default on CuPy; CuPy only; sparse
    couplings, so no size limit beyond memory) or the array operations (default on numpy;
    dense couplings up to :data:`MAX_DENSE_BYTES`).
    """

    def __init__(
        self,
        h: np.ndarray,
        couplings: np.ndarray | scipy.sparse.sparray | scipy.sparse.spmatrix,
        states: np.ndarray,
        seed: int | None,
        xp: ModuleType,
        fused: bool | None = None,
    ) -> None:
        n = len(h)
        if couplings.shape != (n, n) or states.ndim != 2 or states.shape[1] != n:
            raise InvalidParameterError(
                f"need h of length N, couplings N x N and states R x N; got {len(h)}, "
                f"{couplings.shape} and {states.shape}"
            )
        self.fused = xp is not np if fused is None else bool(fused)
        if self.fused and xp is np:
            raise InvalidParameterError(
                "the fused kernel runs on a CUDA GPU only: pass the module of "
                "get_array_module('gpu') or fused=False"
            )
        self.xp = xp
        self.h = xp.asarray(h, dtype=xp.float64)
        if self.fused:
            self._upload_sparse(couplings)
        else:
            _check_dense_size(n)
            if scipy.sparse.issparse(couplings):
                couplings = scipy.sparse.csr_matrix(couplings).toarray()
            self.Q = xp.asarray(couplings, dtype=xp.float64)
        self.restart(states, seed)

    def restart(self, states: np.ndarray, seed: int | None) -> None:
        """Start every run afresh from ``states`` (R x N, R may change) with new random
        streams from ``seed``; the couplings stay on the device."""
        xp = self.xp
        if states.ndim != 2 or states.shape[1] != len(self.h):
            raise InvalidParameterError(f"need states R x {len(self.h)}; got shape {states.shape}")
        self.x = xp.array(states, dtype=xp.int8)  # a copy: the caller's states stay as given
        xf = self.x.astype(xp.float64)
        # C order: the fused kernel indexes run r's fields at g[r * N:]
        self.g = xp.ascontiguousarray(self.h[None, :] + self._times_couplings(xf))
        # E = h.x + x.Q.x / 2 (Q holds each coupling twice)
        self.energy = xf @ self.h + 0.5 * xp.sum(xf * (self.g - self.h[None, :]), axis=1)
        self.best = self.energy.copy()
        self.best_x = self.x.copy()
        self.offset = xp.zeros(len(states), dtype=xp.float64)
        self.rows = xp.arange(len(states))
        self.iteration = 0  # iterations done: the fused kernel's random stream continues there
        if self.fused:
            self.run_keys = xp.asarray(run_key(seed, len(states)))
        else:
            self.uniform = _uniform_source(xp, seed)

    def _upload_sparse(
        self, couplings: np.ndarray | scipy.sparse.sparray | scipy.sparse.spmatrix
    ) -> None:
        csr = scipy.sparse.csr_matrix(couplings)
        csr.sum_duplicates()
        if csr.nnz >= 2**31:
            raise InvalidParameterError(
                f"the fused kernel indexes couplings with 32 bits; got {csr.nnz} nonzeros"
            )
        self.indptr = self.xp.asarray(csr.indptr, dtype=self.xp.int32)
        self.indices = self.xp.asarray(csr.indices, dtype=self.xp.int32)
        self.data = self.xp.asarray(csr.data, dtype=self.xp.float64)
        sparse = importlib.import_module("cupyx.scipy.sparse")
        self.Q = sparse.csr_matrix((self.data, self.indices, self.indptr), shape=csr.shape)

    def _times_couplings(self, xf: Any) -> Any:
        """``xf @ Q`` for ``R x N`` states (``Q`` is symmetric, so ``(Q @ xf.T).T`` if sparse)."""
        if self.fused:
            return (self.Q @ xf.T).T
        return xf @ self.Q

    def iterate(
        self, temperatures: np.ndarray, temperature_interval: int, offset_increase: float
    ) -> None:
        """Continue every run for ``len(temperatures) * temperature_interval`` iterations."""
        temperatures = np.asarray(temperatures, dtype=np.float64)
        if self.fused:
            state = {
                "indptr": self.indptr, "indices": self.indices, "data": self.data,
                "x": self.x, "g": self.g, "best_x": self.best_x, "energy": self.energy,
                "best": self.best, "offset": self.offset, "run_keys": self.run_keys,
            }  # fmt: skip
            fused_iterate(
                self.xp, state, 1.0 / temperatures, temperature_interval, offset_increase,
                self.iteration,
            )  # fmt: skip
            self.iteration += len(temperatures) * temperature_interval
            return
        self.iteration += len(temperatures) * temperature_interval
        xp = self.xp
        shape = self.x.shape
        for temperature in temperatures:
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
        energies = xf @ self.h + 0.5 * xp.sum(xf * self._times_couplings(xf), axis=1)
        states[:] = to_host(self.best_x)
        return to_host(energies).astype(np.float64)


def da_anneal_array(
    h: np.ndarray,
    couplings: np.ndarray | scipy.sparse.sparray | scipy.sparse.spmatrix,
    states: np.ndarray,
    temperatures: np.ndarray,
    temperature_interval: int,
    offset_increase: float,
    seed: int | None,
    xp: ModuleType = np,
    fused: bool | None = None,
) -> np.ndarray:
    """Run one annealing run per row of ``states``, all runs at once (in place: each row ends
    as the run's best state).

    Args:
        h: linear biases (length N, BINARY).
        couplings: ``N x N`` symmetric couplings with a zero diagonal (``Q[i, j]`` is the
            coupling of ``i`` and ``j``), dense (e.g. from :func:`dense_couplings`) or scipy
            sparse.
        states: ``R x N`` int8 initial states (host array); overwritten with the best states.
        temperatures: the schedule; ``temperatures[t]`` holds for ``temperature_interval``
            iterations.
        temperature_interval: iterations per temperature.
        offset_increase: escape-offset increment per iteration without an accepted flip.
        seed: seeds the array module's generator (numpy and CuPy streams differ).
        xp: the array module (numpy, or cupy from :func:`bmfdsl.linalg.get_array_module`).
        fused: the fused CUDA kernel (default with CuPy) or the array operations.

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
    runs = ArrayRuns(h, couplings, states, seed, xp, fused)
    runs.iterate(temperatures, temperature_interval, offset_increase)
    return runs.result(states)

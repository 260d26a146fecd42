"""The Digital Annealer algorithm (Aramon et al. 2019) for any BINARY quadratic model, in numba.

One iteration evaluates every flip energy ``ΔE_i = (1 - 2 x_i) g_i`` from maintained local
fields ``g = h + Q x``, accepts each trial independently with probability
``min(1, exp(-(ΔE_i - E_off) / T))``, applies one accepted flip chosen uniformly (as the
first acceptance in a random order) with an O(degree) field update, and otherwise raises the
escape offset ``E_off`` by a fixed increment (reset to 0 on every accepted flip). Couplings are held
in CSR form, so sparse models such as Formulation 1 (6,040 variables at 30x38, rank 5) stay
cheap. Trials whose acceptance probability is below ``exp(-30)`` are never drawn (they would be
rejected anyway).
"""

from __future__ import annotations

import numba
import numpy as np

_CUTOFF = 30.0


@numba.njit(cache=True)
def local_fields(
    h: np.ndarray, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, x: np.ndarray
) -> np.ndarray:
    """``g = h + Q x`` for the symmetric off-diagonal coupling matrix ``Q`` in CSR form."""
    g = h.copy()
    for i in range(h.shape[0]):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += data[p] * x[indices[p]]
        g[i] += acc
    return g


@numba.njit(cache=True)
def _energy(h, indptr, indices, data, x) -> float:
    e = 0.0
    for i in range(h.shape[0]):
        if x[i]:
            e += h[i]
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                if j > i and x[j]:
                    e += data[p]
    return e


@numba.njit(cache=True)
def _step(x, g, indptr, indices, data, beta, e_off, candidates) -> tuple[int, float]:
    """One parallel-trial iteration; returns ``(flipped index or -1, ΔE of the flip)``.

    Drawing every trial and then one accepted trial uniformly is the same as testing the
    trials in a uniformly random order and taking the first accepted one, so the trials are
    tested in a lazily drawn random permutation (Fisher-Yates) that stops at the first
    acceptance. Only trials with a non-negligible acceptance probability are candidates.
    """
    count = 0
    for i in range(x.shape[0]):
        de = g[i] if x[i] == 0 else -g[i]
        if (de - e_off) * beta <= _CUTOFF:
            candidates[count] = i
            count += 1
    chosen = -1
    for k in range(count):
        pick = k + np.random.randint(count - k)
        i = candidates[pick]
        candidates[pick] = candidates[k]
        candidates[k] = i
        de = g[i] if x[i] == 0 else -g[i]
        excess = (de - e_off) * beta
        if excess <= 0.0 or np.random.random() < np.exp(-excess):
            chosen = i
            break
    if chosen < 0:
        return -1, 0.0
    de = g[chosen] if x[chosen] == 0 else -g[chosen]
    d = 1.0 if x[chosen] == 0 else -1.0
    x[chosen] = 1 - x[chosen]
    for p in range(indptr[chosen], indptr[chosen + 1]):
        g[indices[p]] += d * data[p]
    return chosen, de


@numba.njit(cache=True)
def seed_generator(seed: int) -> None:
    """Seed numba's random generator (used by every kernel here)."""
    np.random.seed(seed)


@numba.njit(cache=True)
def da_start(
    h: np.ndarray, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The local fields of state ``x`` and the run scalars ``[energy, best energy, E_off]``."""
    g = local_fields(h, indptr, indices, data, x.astype(np.float64))
    energy = _energy(h, indptr, indices, data, x)
    scalars = np.array([energy, energy, 0.0])
    return g, scalars


@numba.njit(cache=True)
def da_chunk(
    h: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    x: np.ndarray,
    g: np.ndarray,
    best_x: np.ndarray,
    scalars: np.ndarray,
    temperatures: np.ndarray,
    temperature_interval: int,
    offset_increase: float,
) -> None:
    """Continue one run for ``len(temperatures) * temperature_interval`` iterations.

    ``x``, ``g``, ``best_x`` and ``scalars`` (from :func:`da_start`) are updated in place, so a
    run can be split into chunks (e.g. to follow a wall-clock budget).
    """
    candidates = np.empty(x.shape[0], dtype=np.int64)
    energy, best, e_off = scalars[0], scalars[1], scalars[2]
    for t in range(temperatures.shape[0]):
        beta = 1.0 / temperatures[t]
        for _ in range(temperature_interval):
            chosen, de = _step(x, g, indptr, indices, data, beta, e_off, candidates)
            if chosen < 0:
                e_off += offset_increase
                continue
            e_off = 0.0
            energy += de
            if energy < best - 1e-9:
                best = energy
                best_x[:] = x
    scalars[0], scalars[1], scalars[2] = energy, best, e_off


@numba.njit(cache=True)
def da_anneal(
    h: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    states: np.ndarray,
    temperatures: np.ndarray,
    temperature_interval: int,
    offset_increase: float,
    seed: int,
) -> np.ndarray:
    """Run one annealing run per row of ``states`` (in place: each row ends as the run's best).

    Args:
        h: linear biases (length N).
        indptr, indices, data: symmetric off-diagonal couplings in CSR form.
        states: ``reads x N`` int8 initial states; overwritten with the best state of each run.
        temperatures: the schedule; ``temperatures[t]`` holds for ``temperature_interval``
            iterations, so a run has ``len(temperatures) * temperature_interval`` iterations.
        temperature_interval: iterations per temperature.
        offset_increase: escape-offset increment per iteration without an accepted flip.
        seed: seeds numba's generator.

    Returns:
        the best energy of each run (without the BQM offset).
    """
    np.random.seed(seed)
    best_energies = np.zeros(states.shape[0], dtype=np.float64)
    for run in range(states.shape[0]):
        x = states[run].copy()
        g, scalars = da_start(h, indptr, indices, data, x)
        best_x = x.copy()
        da_chunk(
            h, indptr, indices, data, x, g, best_x, scalars,
            temperatures, temperature_interval, offset_increase,
        )  # fmt: skip
        states[run] = best_x
        best_energies[run] = scalars[1]
    return best_energies


@numba.njit(cache=True)
def da_replica_exchange(
    h: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    states: np.ndarray,
    ladder: np.ndarray,
    iterations: int,
    swap_interval: int,
    offset_increase: float,
    seed: int,
) -> np.ndarray:
    """Replica exchange: ``states`` rows are replicas at the temperatures of ``ladder``.

    Every replica runs parallel-trial iterations at its temperature; every ``swap_interval``
    iterations neighbours swap states with probability ``min(1, exp((β_i - β_j)(E_i - E_j)))``.
    On return ``states[0]`` holds the best state seen and the result holds its energy first,
    then the final energies of the replicas.
    """
    np.random.seed(seed)
    R, N = states.shape
    candidates = np.empty(N, dtype=np.int64)
    x = states.copy()
    g = np.zeros((R, N), dtype=np.float64)
    energies = np.zeros(R, dtype=np.float64)
    offsets = np.zeros(R, dtype=np.float64)
    for rep in range(R):
        g[rep] = local_fields(h, indptr, indices, data, x[rep].astype(np.float64))
        energies[rep] = _energy(h, indptr, indices, data, x[rep])
    best = energies[0]
    best_x = x[0].copy()
    for rep in range(R):
        if energies[rep] < best:
            best = energies[rep]
            best_x[:] = x[rep]
    for it in range(iterations):
        for rep in range(R):
            chosen, de = _step(
                x[rep], g[rep], indptr, indices, data, 1.0 / ladder[rep], offsets[rep], candidates
            )
            if chosen < 0:
                offsets[rep] += offset_increase
                continue
            offsets[rep] = 0.0
            energies[rep] += de
            if energies[rep] < best - 1e-9:
                best = energies[rep]
                best_x[:] = x[rep]
        if (it + 1) % swap_interval == 0:
            for rep in range((it // swap_interval) & 1, R - 1, 2):
                arg = (1.0 / ladder[rep] - 1.0 / ladder[rep + 1]) * (
                    energies[rep] - energies[rep + 1]
                )
                if arg >= 0.0 or np.random.random() < np.exp(arg):
                    tmp = x[rep].copy()
                    x[rep] = x[rep + 1]
                    x[rep + 1] = tmp
                    tmp_g = g[rep].copy()
                    g[rep] = g[rep + 1]
                    g[rep + 1] = tmp_g
                    e = energies[rep]
                    energies[rep] = energies[rep + 1]
                    energies[rep + 1] = e
    states[:] = x
    states[0] = best_x
    out = np.zeros(R + 1, dtype=np.float64)
    out[0] = best
    out[1:] = energies
    return out

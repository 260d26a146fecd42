"""Driving the DA kernels: one anneal, replica exchange, or restarts within a time limit.

:func:`run_da` runs every read as :class:`DASettings` say, on the device they name: the numba
kernels of :mod:`bmfdsl.solvers.da._kernel` one read after another (``"cpu"``), or all reads
at once as array code (``"numpy"``, ``"gpu"``: :mod:`bmfdsl.solvers.da._array`). With a time
limit each read anneals again from fresh random states while time is left and keeps its best
(see :class:`_Rounds`); replica exchange instead sizes one run to the limit. The ``da``
backend (:mod:`bmfdsl.backends.da`) checks the keywords and builds the SampleSet around it.

>>> import dimod
>>> bqm = dimod.BinaryQuadraticModel({"a": 1.0, "b": -1.0}, {("a", "b"): -3.0}, 0, "BINARY")
>>> h, indptr, indices, data, labels = prepare_bqm(bqm)
>>> hot, cold = default_temperatures(h, indptr, data)
>>> settings = DASettings(num_reads=2, seed=1, mode="anneal", device="cpu", num_sweeps=200,
...     time_limit=None, hot=hot, cold=cold, interval=1, increase=cold, replicas=8,
...     swap_interval=10)
>>> run = run_da(settings, (h, indptr, indices, data), np.zeros((2, 2), np.int8), [3, 4])
>>> run.states.tolist(), run.sweeps_per_anneal, run.anneals_per_read
([[1, 1], [1, 1]], 200, 1.0)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import dimod
import numpy as np
import scipy.sparse

from bmfdsl.linalg import get_array_module
from bmfdsl.solvers.da._array import ArrayRuns
from bmfdsl.solvers.da._kernel import (
    da_anneal,
    da_chunk,
    da_replica_exchange,
    da_start,
    seed_generator,
)

#: How a read searches: one anneal (or restarts of it), or a ladder of replicas.
DA_MODES = ("anneal", "replica-exchange")
#: Where it runs: the numba kernels, dense numpy array code, or CuPy on a GPU.
DA_DEVICES = ("cpu", "numpy", "gpu")

#: (h, indptr, indices, data): a model as the kernels take it (see :func:`prepare_bqm`).
DAModel = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def prepare_bqm(
    bqm: dimod.BinaryQuadraticModel,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[Any]]:
    """BINARY biases of ``bqm`` as ``(h, indptr, indices, data, labels)`` with symmetric CSR
    couplings (the offset is not needed: energies are recomputed from ``bqm``).

    >>> bqm = dimod.BinaryQuadraticModel({"a": 1.0}, {("a", "b"): -3.0}, 0, "BINARY")
    >>> h, indptr, indices, data, labels = prepare_bqm(bqm)
    >>> h.tolist(), indptr.tolist(), indices.tolist(), data.tolist(), labels
    ([1.0, 0.0], [0, 1, 2], [1, 0], [-3.0, -3.0], ['a', 'b'])
    """
    binary = bqm.change_vartype(dimod.BINARY, inplace=False) if bqm.vartype is dimod.SPIN else bqm
    labels = list(binary.variables)
    vectors = binary.to_numpy_vectors(variable_order=labels)
    h = vectors.linear_biases
    row, col, quad = (
        vectors.quadratic.row_indices,
        vectors.quadratic.col_indices,
        vectors.quadratic.biases,
    )
    n = len(labels)
    coupling = scipy.sparse.coo_matrix(
        (np.concatenate([quad, quad]), (np.concatenate([row, col]), np.concatenate([col, row]))),
        shape=(n, n),
    ).tocsr()
    coupling.sum_duplicates()
    return (
        np.ascontiguousarray(h, dtype=np.float64),
        coupling.indptr.astype(np.int64),
        coupling.indices.astype(np.int64),
        coupling.data.astype(np.float64),
        labels,
    )


def default_temperatures(
    h: np.ndarray, indptr: np.ndarray, data: np.ndarray
) -> tuple[float, float]:
    """A hot and a cold temperature from the bias scale of the model.

    Cold: the smallest nonzero bias is accepted with probability ``exp(-20)``. Hot: the median
    variable's largest flip energy is accepted with probability 1/2, but at most ``20 x cold``:
    the DA flips one variable per iteration, so a hotter start only randomises the state
    (measured on Formulation 1 at 30x38, rank 5).

    >>> default_temperatures(np.array([1.0, -2.0]), np.array([0, 0, 0]), np.array([]))
    (1.0, 0.05)
    """
    row_abs = np.add.reduceat(np.abs(data), indptr[:-1]) if data.size else np.zeros_like(h)
    row_abs = np.where(np.diff(indptr) > 0, row_abs, 0.0)
    scale = np.abs(h) + row_abs
    positive = scale[scale > 0]
    magnitudes = np.concatenate([np.abs(h), np.abs(data)])
    magnitudes = magnitudes[magnitudes > 1e-12]
    cold = float(magnitudes.min()) / 20 if magnitudes.size else 0.05
    hot = float(np.median(positive)) / math.log(2) if positive.size else 1.0
    hot = min(hot, 20 * cold)
    return max(hot, cold), cold


@dataclass(frozen=True)
class DASettings:
    """How to run the reads (checked by the caller; the ``da`` backend checks its keywords).

    Attributes:
        num_reads: independent reads; ``seed`` seeds the random starts and restarts.
        mode, device: one of :data:`DA_MODES` and of :data:`DA_DEVICES` (array devices run
            ``"anneal"`` only).
        num_sweeps: iterations per anneal; None: by the model's size (see
            :func:`_sweeps_per_anneal`).
        time_limit: seconds for all reads (None: one anneal each, deterministic).
        hot, cold: the temperature range; ``interval``: iterations per temperature step;
            ``increase``: the escape-offset increment per rejected iteration.
        replicas, swap_interval: the ladder of replica exchange.
    """

    num_reads: int
    seed: int | None
    mode: str
    device: str
    num_sweeps: int | None
    time_limit: float | None
    hot: float
    cold: float
    interval: int
    increase: float
    replicas: int
    swap_interval: int


@dataclass(frozen=True)
class DARun:
    """What :func:`run_da` did: each read's best state (BINARY, one row a read), the
    iterations of one anneal, the anneals per read (a mean over reads with a time limit), and
    the seconds spent compiling the kernels (0 once compiled) and annealing."""

    states: np.ndarray
    sweeps_per_anneal: int
    anneals_per_read: float
    compile_seconds: float
    anneal_seconds: float


def run_da(
    settings: DASettings, model: DAModel, states: np.ndarray, read_seeds: list[int]
) -> DARun:
    """Anneal every read of ``states`` (BINARY start states, one row a read) as ``settings``
    say, read ``i`` seeded by ``read_seeds[i]`` (array devices use ``read_seeds[0]`` for all).

    The kernels are compiled first, outside the clock: ``time_limit`` is for annealing.
    """
    compile_seconds = _compile_kernels()
    started = time.perf_counter()
    best, sweeps, rounds = _run(settings, model, states, read_seeds)
    return DARun(best, sweeps, rounds, compile_seconds, time.perf_counter() - started)


def _run(
    settings: DASettings, model: DAModel, states: np.ndarray, run_seeds: list[int]
) -> tuple[np.ndarray, int, float]:
    """The best states, the iterations of one anneal and the number of anneals per read."""
    n = len(model[0])
    if settings.device != "cpu":
        return _anneal_array(settings, states, model, run_seeds[0])
    limit = settings.time_limit
    if limit is not None and settings.mode == "anneal":
        round_sweeps = _sweeps_per_anneal(settings.num_sweeps, n)
        return _anneal_for(limit, settings, round_sweeps, states, model, run_seeds)
    if limit is not None:
        return _replica_exchange_for(limit, settings, states, model, run_seeds)
    sweeps = _sweeps_per_anneal(settings.num_sweeps, n)
    if settings.mode == "anneal":
        return _anneal(settings, sweeps, states, model, run_seeds[0]), sweeps, 1.0
    return _replica_exchange(settings, sweeps, states, model, run_seeds), sweeps, 1.0


def _anneal(
    settings: DASettings, sweeps: int, states: np.ndarray, model: DAModel, seed: int
) -> np.ndarray:
    """One anneal of ``sweeps`` iterations for every read (the numba kernel)."""
    steps = max(1, sweeps // settings.interval)
    schedule = np.geomspace(settings.hot, settings.cold, steps)
    out = states.copy()
    da_anneal(*model, out, schedule, settings.interval, settings.increase, seed)
    return out


def _replica_exchange(
    settings: DASettings,
    sweeps: int,
    states: np.ndarray,
    model: DAModel,
    run_seeds: list[int],
) -> np.ndarray:
    """A replica-exchange run of ``sweeps`` iterations for each of ``states``; the coldest
    replica's best state of each."""
    ladder = np.geomspace(settings.cold, settings.hot, settings.replicas)
    out = np.empty_like(states)
    for read in range(len(states)):
        replica_states = np.repeat(states[read : read + 1], settings.replicas, axis=0)
        swaps, increase = settings.swap_interval, settings.increase
        da_replica_exchange(
            *model, replica_states, ladder, sweeps, swaps, increase, run_seeds[read]
        )
        out[read] = replica_states[0]
    return out


def _replica_exchange_for(
    limit: float, settings: DASettings, states: np.ndarray, model: DAModel, run_seeds: list[int]
) -> tuple[np.ndarray, int, float]:
    """Replica exchange in ``limit`` seconds: calibrate on a short run, then size the runs."""
    started = time.perf_counter()
    probe = 50
    _replica_exchange(settings, probe, states[:1], model, run_seeds)
    per_sweep = (time.perf_counter() - started) / probe
    left = limit - (time.perf_counter() - started)
    sweeps = max(1, int(left / per_sweep / settings.num_reads))
    if settings.num_sweeps is not None:
        sweeps = min(sweeps, settings.num_sweeps)
    return _replica_exchange(settings, sweeps, states, model, run_seeds), sweeps, 1.0


def _anneal_for(
    limit: float,
    settings: DASettings,
    round_sweeps: int,
    states: np.ndarray,
    model: DAModel,
    run_seeds: list[int],
) -> tuple[np.ndarray, int, float]:
    """Anneal each read for ``limit / num_reads`` seconds: from its initial state, then from
    fresh random states while time is left (see :class:`_Rounds`); each read keeps its best
    state."""
    out = states.copy()
    sweeps, counts = [], []
    for read in range(len(states)):
        rounds = _Rounds(limit / len(states), round_sweeps)
        out[read] = _anneal_read_for(rounds, settings, states[read], model, run_seeds[read])
        sweeps.append(rounds.sweeps_per_anneal())
        counts.append(rounds.count)
    return out, int(np.mean(sweeps)), float(np.mean(counts))


def _anneal_read_for(
    rounds: _Rounds, settings: DASettings, start: np.ndarray, model: DAModel, seed: int
) -> np.ndarray:
    """One read's rounds (the numba chunk kernel, cooled by each round's progress): its best
    state over all of them."""
    hot, cold, interval, increase = (
        settings.hot,
        settings.cold,
        settings.interval,
        settings.increase,
    )
    seed_generator(seed)
    restarts = np.random.default_rng(seed)
    best = math.inf
    best_state = start.copy()
    x = start.copy()
    while rounds.another():
        g, scalars = da_start(*model, x)
        best_x = x.copy()
        while (progress := rounds.progress()) < 1.0:
            chunk = rounds.chunk(max(1, 256 // interval), interval)
            schedule = np.full(chunk, hot * (cold / hot) ** progress)
            da_chunk(*model, x, g, best_x, scalars, schedule, interval, increase)
            rounds.done(chunk * interval)
        if scalars[1] < best:
            best = float(scalars[1])
            best_state = best_x
        x = restarts.integers(0, 2, size=len(x), dtype=np.int8)
    return best_state


def _anneal_array(
    settings: DASettings, states: np.ndarray, model: DAModel, seed: int
) -> tuple[np.ndarray, int, float]:
    """All reads at once on the array device: one anneal of ``num_sweeps`` iterations or,
    with ``time_limit``, anneals from fresh random states while time is left (see
    :class:`_Rounds`). Returns the best states, the iterations of one anneal and the number
    of anneals."""
    xp = get_array_module(settings.device)
    h, indptr, indices, data = model
    n = len(h)
    couplings = scipy.sparse.csr_matrix((data, indices, indptr), shape=(n, n))
    round_sweeps = _sweeps_per_anneal(settings.num_sweeps, n)
    if settings.time_limit is None:
        steps = max(1, round_sweeps // settings.interval)
        runs = ArrayRuns(h, couplings, states, seed, xp)
        schedule = np.geomspace(settings.hot, settings.cold, steps)
        runs.iterate(schedule, settings.interval, settings.increase)
        out = states.copy()
        runs.result(out)
        return out, steps * settings.interval, 1.0
    # CuPy compiles its kernels at first use for each shape (seconds with a cold cache,
    # measured 8 s on an H100): use them once before the clock; rounds restart this run
    runs = ArrayRuns(h, couplings, states, 0, xp)
    runs.iterate(np.array([settings.cold]), settings.interval, settings.increase)
    runs.result(np.empty_like(states))
    rounds = _Rounds(settings.time_limit, round_sweeps)
    return _anneal_array_for(runs, rounds, settings, states, seed)


def _anneal_array_for(
    runs: ArrayRuns, rounds: _Rounds, settings: DASettings, states: np.ndarray, seed: int
) -> tuple[np.ndarray, int, float]:
    """Rounds of all reads at once while time is left, the first from ``states``; each read
    keeps its best state."""
    restarts = np.random.default_rng(seed)
    out = states.copy()
    best = np.full(len(states), np.inf)
    start_states = states
    while rounds.another():
        runs.restart(start_states, int(restarts.integers(2**31)))
        _array_round(runs, rounds, settings)
        round_states = np.empty_like(states)
        energies = runs.result(round_states)
        better = energies < best - 1e-9
        out[better] = round_states[better]
        best = np.minimum(best, energies)
        start_states = restarts.integers(0, 2, size=states.shape, dtype=np.int8)
    return out, rounds.sweeps_per_anneal(), float(rounds.count)


def _array_round(runs: ArrayRuns, rounds: _Rounds, settings: DASettings) -> None:
    """One anneal of every read on the array device, cooled by the round's progress."""
    hot, cold, interval = settings.hot, settings.cold, settings.interval
    steps = max(1, 64 // interval)
    last = time.perf_counter()
    while True:
        runs.synchronize()  # GPU work is queued asynchronously: settle it first
        now = time.perf_counter()
        progress = rounds.progress()
        if progress >= 1.0:
            break
        if now - last < rounds.limit / 200 and steps < 2**16:
            steps *= 2  # fewer host round trips once a chunk is cheap next to the limit
        last = now
        chunk = rounds.chunk(steps, interval)
        temperature = hot * (cold / hot) ** progress
        runs.iterate(np.full(chunk, temperature), interval, settings.increase)
        rounds.done(chunk * interval)


_kernels_ready = False


def _compile_kernels() -> float:
    """Compile the numba kernels (or load them from numba's cache) once per process, on a
    two-variable model with the dtypes of :func:`prepare_bqm`; returns the seconds it took
    (0 once done). With a cold cache this takes seconds, which a time limit must not pay."""
    global _kernels_ready
    if _kernels_ready:
        return 0.0
    started = time.perf_counter()
    bqm = dimod.BinaryQuadraticModel({0: 1.0, 1: -1.0}, {(0, 1): -2.0}, 0.0, dimod.BINARY)
    h, indptr, indices, data, _ = prepare_bqm(bqm)
    states = np.zeros((2, 2), dtype=np.int8)
    schedule = np.array([1.0, 0.5])
    da_anneal(h, indptr, indices, data, states, schedule, 1, 0.1, 0)
    seed_generator(0)
    x = np.zeros(2, dtype=np.int8)
    g, scalars = da_start(h, indptr, indices, data, x)
    da_chunk(h, indptr, indices, data, x, g, x.copy(), scalars, schedule, 1, 0.1)
    da_replica_exchange(h, indptr, indices, data, states, schedule, 2, 1, 0.1, 0)
    _kernels_ready = True
    return time.perf_counter() - started


def _sweeps_per_anneal(num_sweeps: int | None, num_variables: int) -> int:
    """Iterations of one anneal: ``num_sweeps`` or ``max(1000, 10 N)``.

    One iteration flips at most one variable, so an anneal needs many more iterations than
    variables: 1,000 iterations at 6,040 variables (Formulation 1, 30x38, r = 5) end near the
    random start's energy (about 6,200), 10 N near 420. In a time budget (2 s, 2,880-6,040
    variables), restarts of 5-20 N beat one anneal stretched over the whole budget (30-100
    N), which ends in the trivial U = V = 0 basin more often (measured with 4 reads on the
    CPU and 4-1,024 on an H100).
    """
    return max(1000, 10 * num_variables) if num_sweeps is None else num_sweeps


class _Rounds:
    """Anneals ("rounds") within a time budget.

    A round ends after ``round_sweeps`` iterations or when the remaining time is spent: its
    temperature follows whichever of the two is further along. Another round starts while
    at least half as long as the last one is left (a last round that cannot finish its
    iterations follows the clock), so a short budget gives one anneal that follows the clock.
    """

    def __init__(self, limit: float, round_sweeps: int) -> None:
        self.limit = limit
        self.round_sweeps = round_sweeps
        self.end = time.perf_counter() + limit
        self.count = 0
        self.total_sweeps = 0
        self._round_start = 0.0
        self._remaining = 0.0
        self._sweeps = 0

    def another(self) -> bool:
        """Start a round if half of the last one's time is left (the first always starts)."""
        now = time.perf_counter()
        if self.count and self.end - now < 0.5 * (now - self._round_start):
            return False
        self.count += 1
        self._round_start, self._remaining, self._sweeps = now, max(self.end - now, 1e-9), 0
        return True

    def progress(self) -> float:
        """How far the current round is, by iterations or by the clock (over at 1)."""
        elapsed = (time.perf_counter() - self._round_start) / self._remaining
        return max(elapsed, self._sweeps / self.round_sweeps)

    def chunk(self, steps: int, interval: int) -> int:
        """At most ``steps`` temperature steps, no more than the round has left and no more
        than 1/32 of a round (so that every anneal cools in at least 32 steps)."""
        left = -(-(self.round_sweeps - self._sweeps) // interval)
        return max(1, min(steps, left, self.round_sweeps // (32 * interval)))

    def done(self, sweeps: int) -> None:
        self._sweeps += sweeps
        self.total_sweeps += sweeps

    def sweeps_per_anneal(self) -> int:
        return self.total_sweeps // max(1, self.count)

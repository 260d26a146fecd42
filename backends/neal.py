"""``neal``, ``tabu`` and ``steepest``: the classical samplers of ``dwave-samplers``.

``neal`` falls back to the ``dwave-neal`` package when ``dwave-samplers`` is missing.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import dimod

from bmfdsl.backends._common import (
    BackendSampler,
    Initialized,
    check_run_options,
    given_options,
    run_rounds,
)
from bmfdsl.errors import (
    BackendUnavailableError,
    InvalidParameterError,
    ModelTooLargeError,
)

__all__ = ["NealBackend", "SteepestBackend", "TabuBackend"]

#: Sweeps per read when ``num_sweeps`` is not given: dwave-samplers' own choice, in ``info``.
DWAVE_SAMPLERS_SWEEPS = 1000

_COMMON = {
    "num_reads": "number of independent reads (None: one per initial state, else 1)",
    "seed": "seed in [0, 2**31); the same seed gives the same samples",
    "initial_states": "warm starts, e.g. compiled.encode(U, V); one or more full states",
    "initial_states_generator": "how reads beyond the initial states start: 'random', "
    "'tile' (repeat them) or 'none' (an error)",
}


def _simulated_annealing_sampler() -> dimod.Sampler:
    try:
        from dwave.samplers import SimulatedAnnealingSampler
    except ImportError:
        try:
            from neal import (  # type: ignore[no-redef]  # the dwave-neal shim
                SimulatedAnnealingSampler,
            )
        except ImportError as exc:
            raise BackendUnavailableError(
                "backend 'neal' needs dwave-samplers: pip install dwave-samplers"
            ) from exc
    return SimulatedAnnealingSampler()


def _count_warm_starts(
    sampler: Initialized, bqm: dimod.BinaryQuadraticModel, initial_states: Any
) -> int:
    """How many warm starts ``initial_states`` holds (0 for None), checked with bmfdsl's
    errors before dwave-samplers sees them."""
    return 0 if initial_states is None else len(sampler.given_states(bqm, initial_states))


class NealBackend(BackendSampler, Initialized):
    """Simulated annealing (``dwave.samplers.SimulatedAnnealingSampler``).

    ``time_limit`` (seconds) runs rounds of ``num_reads`` reads, each round with a fresh seed
    derived from ``seed``, while another round is expected to fit in the time left (reads
    stop at the deadline; a read in progress finishes first), and returns the ``num_reads``
    best samples; ``info["total_reads"]`` and ``info["num_rounds"]`` count the work done.
    For one long anneal in a budget, set ``num_sweeps`` to fit it.

    >>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -1.0}, {("x", "y"): -3.0}, 0, "BINARY")
    >>> float(NealBackend().sample(bqm, num_reads=4, seed=1).first.energy)
    -3.0
    """

    name: ClassVar[str] = "neal"
    descriptions: ClassVar[dict[str, str]] = {
        **_COMMON,
        "time_limit": "seconds: rounds of num_reads reads while one fits; keep the best",
        "num_sweeps": f"sweeps per read (None: {DWAVE_SAMPLERS_SWEEPS}, or the length of a "
        "custom beta_schedule times num_sweeps_per_beta)",
        "num_sweeps_per_beta": "sweeps at each temperature (None: dwave-samplers' own)",
        "beta_range": "(hot, cold) inverse temperatures (None: from the model's biases)",
        "beta_schedule_type": "'geometric', 'linear' or 'custom' (None: dwave-samplers' own)",
        "beta_schedule": "explicit inverse temperatures (with beta_schedule_type='custom')",
        "randomize_order": "visit variables in random order (None: dwave-samplers' own)",
        "proposal_acceptance_criteria": "'Metropolis' or 'Gibbs' (None: dwave-samplers' own)",
    }

    def _sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        num_reads: int | None = None,
        seed: int | None = None,
        initial_states: Any = None,
        initial_states_generator: str = "random",
        time_limit: float | None = None,
        num_sweeps: int | None = None,
        num_sweeps_per_beta: int | None = None,
        beta_range: Any = None,
        beta_schedule_type: str | None = None,
        beta_schedule: Any = None,
        randomize_order: bool | None = None,
        proposal_acceptance_criteria: str | None = None,
    ) -> dimod.SampleSet:
        sampler = _simulated_annealing_sampler()
        # num_reads None lets dwave-samplers default to one read per initial state (or 1)
        num_reads, seed, time_limit = check_run_options(num_reads, seed, time_limit)
        given = _count_warm_starts(self, bqm, initial_states)
        # the rest go to dwave-samplers as given; its own defaults stand for the others
        options = given_options(
            initial_states=initial_states,
            initial_states_generator=initial_states_generator,
            num_sweeps=num_sweeps,
            num_sweeps_per_beta=num_sweeps_per_beta,
            beta_range=beta_range,
            beta_schedule_type=beta_schedule_type,
            beta_schedule=beta_schedule,
            randomize_order=randomize_order,
            proposal_acceptance_criteria=proposal_acceptance_criteria,
        )
        if time_limit is None:
            sampleset = sampler.sample(bqm, num_reads=num_reads, seed=seed, **options)
        else:

            def run_round(round_seed: int, deadline: float) -> dimod.SampleSet:
                return sampler.sample(
                    bqm,
                    num_reads=num_reads,
                    seed=round_seed,
                    interrupt_function=lambda: time.perf_counter() >= deadline,
                    **options,
                )

            sampleset = run_rounds(
                run_round, time_limit=time_limit, seed=seed, num_reads=num_reads or given or 1
            )
        sampleset.info["num_sweeps"] = _sweeps_per_read(
            num_sweeps, num_sweeps_per_beta, beta_schedule_type, beta_schedule
        )
        return sampleset


def _sweeps_per_read(
    num_sweeps: int | None,
    num_sweeps_per_beta: int | None,
    beta_schedule_type: str | None,
    beta_schedule: Any,
) -> int:
    """The sweeps dwave-samplers runs per read: a custom schedule fixes them itself.

    >>> _sweeps_per_read(None, 2, "custom", [0.1, 1.0, 5.0])
    6
    >>> _sweeps_per_read(None, None, None, None)
    1000
    """
    if beta_schedule_type == "custom" and beta_schedule is not None:
        return len(beta_schedule) * (num_sweeps_per_beta or 1)
    return int(num_sweeps or DWAVE_SAMPLERS_SWEEPS)


class TabuBackend(BackendSampler, Initialized):
    """Multistart tabu search (``dwave.samplers.TabuSampler``).

    ``time_limit`` (seconds) is the total budget; each read gets ``time_limit / num_reads``
    (TabuSampler's ``timeout`` in milliseconds, at least 1 ms). Without it, TabuSampler gives
    each read its own default timeout (20 ms). TabuSampler copies the model into a dense
    ``N x N`` float64 matrix: a model whose copy passes ``max_dense_bytes`` (2 GiB) is
    refused before it starts.

    >>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -1.0}, {("x", "y"): -3.0}, 0, "BINARY")
    >>> float(TabuBackend().sample(bqm, time_limit=0.01, seed=1).first.energy)
    -3.0
    """

    name: ClassVar[str] = "tabu"
    descriptions: ClassVar[dict[str, str]] = {
        **_COMMON,
        "time_limit": "seconds for the whole call, split evenly over the reads (None: "
        "TabuSampler's timeout per read)",
        "tenure": "tabu tenure (None: TabuSampler's own, from the model's size)",
        "num_restarts": "restarts per read before stopping (None: TabuSampler's own)",
        "energy_threshold": "stop a read once this energy is reached",
    }

    def __init__(self, max_dense_bytes: int = 2 * 2**30) -> None:
        if isinstance(max_dense_bytes, bool) or not isinstance(max_dense_bytes, int):
            raise InvalidParameterError(
                f"max_dense_bytes must be an int (bytes); got {max_dense_bytes!r}"
            )
        self.max_dense_bytes = max_dense_bytes

    def __repr__(self) -> str:
        return f"TabuBackend(max_dense_bytes={self.max_dense_bytes})"

    @property
    def properties(self) -> dict[str, Any]:
        """Adds ``max_dense_bytes``."""
        return {**super().properties, "max_dense_bytes": self.max_dense_bytes}

    def _sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        num_reads: int | None = None,
        seed: int | None = None,
        initial_states: Any = None,
        initial_states_generator: str = "random",
        time_limit: float | None = None,
        tenure: int | None = None,
        num_restarts: int | None = None,
        energy_threshold: float | None = None,
    ) -> dimod.SampleSet:
        from dwave.samplers import TabuSampler

        _check_dense_size(bqm.num_variables, self.max_dense_bytes)
        num_reads, seed, time_limit = check_run_options(num_reads, seed, time_limit)
        given = _count_warm_starts(self, bqm, initial_states)
        timeout = None
        if time_limit is not None:
            timeout = max(1, round(time_limit * 1000 / (num_reads or given or 1)))
        options = given_options(
            initial_states=initial_states,
            initial_states_generator=initial_states_generator,
            tenure=tenure,
            num_restarts=num_restarts,
            energy_threshold=energy_threshold,
            timeout=timeout,
        )
        return TabuSampler().sample(bqm, num_reads=num_reads, seed=seed, **options)


def _check_dense_size(num_variables: int, limit: int) -> None:
    """Refuse a model whose dense ``N x N`` float64 QUBO matrix, which TabuSampler copies it
    into, passes ``limit`` bytes (a 300 x 60 rank-4 model: 73,440 variables, 40 GiB, had
    failed inside dwave-samplers with numpy's allocation error).

    >>> _check_dense_size(1000, 2**31)
    >>> _check_dense_size(73_440, 2**31)
    Traceback (most recent call last):
    ...
    bmfdsl.errors.ModelTooLargeError: tabu copies the model into a dense 73,440 x 73,440 ...
    """
    needed = 8 * num_variables**2
    if needed > limit:
        raise ModelTooLargeError(
            f"tabu copies the model into a dense {num_variables:,} x {num_variables:,} matrix "
            f"({needed / 2**30:.1f} GiB, over its limit of {limit / 2**30:.1f} GiB); sample "
            "rows (factorize(sample_rows='auto')), lower the rank, use 'native' or 'neal', "
            "which keep the model sparse, or pass backend=TabuBackend(max_dense_bytes=...) "
            "where memory allows"
        )


class SteepestBackend(BackendSampler, Initialized):
    """Steepest greedy descent (``dwave.samplers.SteepestDescentSolver``).

    Each read descends from its initial state to a local minimum: a fast polish for warm
    starts. It has no time knob, so it takes no ``time_limit``.

    >>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -1.0}, {("x", "y"): -3.0}, 0, "BINARY")
    >>> float(SteepestBackend().sample(bqm, initial_states={"x": 0, "y": 1}).first.energy)
    -3.0
    """

    name: ClassVar[str] = "steepest"
    descriptions: ClassVar[dict[str, str]] = {
        **_COMMON,
        "large_sparse_opt": "use the large-sparse-model code path",
    }

    def _sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        num_reads: int | None = None,
        seed: int | None = None,
        initial_states: Any = None,
        initial_states_generator: str = "random",
        large_sparse_opt: bool = False,
    ) -> dimod.SampleSet:
        from dwave.samplers import SteepestDescentSolver

        num_reads, seed, _ = check_run_options(num_reads, seed, None)
        _count_warm_starts(self, bqm, initial_states)  # bmfdsl's error for a state it cannot take
        options = given_options(
            initial_states=initial_states,
            initial_states_generator=initial_states_generator,
            large_sparse_opt=large_sparse_opt,
        )
        return SteepestDescentSolver().sample(bqm, num_reads=num_reads, seed=seed, **options)

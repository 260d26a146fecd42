"""``neal``, ``tabu`` and ``steepest``: the classical samplers of ``dwave-samplers``.

``neal`` falls back to the ``dwave-neal`` package when ``dwave-samplers`` is missing.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import dimod

from bmfdsl.backends._common import BackendSampler, pop_run_options, run_rounds
from bmfdsl.errors import BackendUnavailableError

__all__ = ["NealBackend", "SteepestBackend", "TabuBackend"]

_COMMON = {
    "num_reads": "number of independent reads (default 1)",
    "seed": "seed in [0, 2**31); the same seed gives the same samples",
    "initial_states": "warm starts, e.g. compiled.encode(U, V); one or more full states",
    "initial_states_generator": "'random' (default), 'tile' or 'none': fills missing reads",
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


def _count_initial_states(params: dict[str, Any]) -> int:
    if params.get("initial_states") is None:
        return 0
    return len(dimod.as_samples(params["initial_states"])[0])


class NealBackend(BackendSampler):
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
    accepted_parameters: ClassVar[dict[str, str]] = {
        **_COMMON,
        "time_limit": "seconds: rounds of num_reads reads while one fits; keep the best",
        "num_sweeps": "sweeps per read (default 1000)",
        "num_sweeps_per_beta": "sweeps at each temperature (default 1)",
        "beta_range": "(hot, cold) inverse temperatures; default from the model's biases",
        "beta_schedule_type": "'geometric' (default), 'linear' or 'custom'",
        "beta_schedule": "explicit inverse temperatures (with beta_schedule_type='custom')",
        "randomize_order": "visit variables in random order (default False)",
        "proposal_acceptance_criteria": "'Metropolis' (default) or 'Gibbs'",
    }

    def _sample(self, bqm: dimod.BinaryQuadraticModel, **params: Any) -> dimod.SampleSet:
        sampler = _simulated_annealing_sampler()
        # num_reads None lets dwave-samplers default to one read per initial state (or 1)
        num_reads, seed, time_limit = pop_run_options(params)
        if time_limit is None:
            sampleset = sampler.sample(bqm, num_reads=num_reads, seed=seed, **params)
        else:

            def run_round(round_seed: int, deadline: float) -> dimod.SampleSet:
                return sampler.sample(
                    bqm,
                    num_reads=num_reads,
                    seed=round_seed,
                    interrupt_function=lambda: time.perf_counter() >= deadline,
                    **params,
                )

            sampleset = run_rounds(
                run_round,
                time_limit=time_limit,
                seed=seed,
                num_reads=num_reads or _count_initial_states(params) or 1,
            )
        sampleset.info["num_sweeps"] = int(params.get("num_sweeps", 1000))
        return sampleset


class TabuBackend(BackendSampler):
    """Multistart tabu search (``dwave.samplers.TabuSampler``).

    ``time_limit`` (seconds) is the total budget; each read gets ``time_limit / num_reads``
    (TabuSampler's ``timeout`` in milliseconds, at least 1 ms). The default is 20 ms per read.

    >>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -1.0}, {("x", "y"): -3.0}, 0, "BINARY")
    >>> float(TabuBackend().sample(bqm, time_limit=0.01, seed=1).first.energy)
    -3.0
    """

    name: ClassVar[str] = "tabu"
    accepted_parameters: ClassVar[dict[str, str]] = {
        **_COMMON,
        "time_limit": "seconds for the whole call, split evenly over the reads",
        "tenure": "tabu tenure (default min(20, N/4))",
        "num_restarts": "restarts per read before stopping (default 1000000)",
        "energy_threshold": "stop a read once this energy is reached",
    }

    def _sample(self, bqm: dimod.BinaryQuadraticModel, **params: Any) -> dimod.SampleSet:
        from dwave.samplers import TabuSampler

        num_reads, seed, time_limit = pop_run_options(params)
        if time_limit is not None:
            reads = num_reads or _count_initial_states(params) or 1
            params["timeout"] = max(1, round(time_limit * 1000 / reads))
        return TabuSampler().sample(bqm, num_reads=num_reads, seed=seed, **params)


class SteepestBackend(BackendSampler):
    """Steepest greedy descent (``dwave.samplers.SteepestDescentSolver``).

    Each read descends from its initial state to a local minimum: a fast polish for warm
    starts. It has no time knob, so it takes no ``time_limit``.

    >>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -1.0}, {("x", "y"): -3.0}, 0, "BINARY")
    >>> float(SteepestBackend().sample(bqm, initial_states={"x": 0, "y": 1}).first.energy)
    -3.0
    """

    name: ClassVar[str] = "steepest"
    accepted_parameters: ClassVar[dict[str, str]] = {
        **_COMMON,
        "large_sparse_opt": "use the large-sparse-model code path (default False)",
    }

    def _sample(self, bqm: dimod.BinaryQuadraticModel, **params: Any) -> dimod.SampleSet:
        from dwave.samplers import SteepestDescentSolver

        num_reads, seed, _ = pop_run_options(params)  # it takes no time_limit
        return SteepestDescentSolver().sample(bqm, num_reads=num_reads, seed=seed, **params)

"""``openjij-sa`` and ``openjij-sqa``: OpenJij's simulated (quantum) annealing.

OpenJij mishandles string and tuple labels, so variables are relabelled to ``0..N-1``
before sampling and back afterwards; energies are recomputed from the original model.
"""

from __future__ import annotations

from typing import Any, ClassVar

import dimod
import numpy as np

from bmfdsl.backends._common import (
    BackendSampler,
    Initialized,
    check_run_options,
    round_seeds,
    run_rounds,
)
from bmfdsl.errors import BackendUnavailableError

__all__ = ["OpenJijSABackend", "OpenJijSQABackend"]

_COMMON = {
    "num_reads": "number of independent reads (None: one per initial state, else 1)",
    "seed": "seed in [0, 2**31); the same seed gives the same samples",
    "time_limit": "seconds: rounds of num_reads reads while one fits; keep the best",
    "initial_states": "warm starts, e.g. compiled.encode(U, V); reads are shared among them",
    "num_sweeps": "Monte Carlo sweeps per read",
}


def _import_openjij() -> Any:
    try:
        import openjij
    except ImportError as exc:
        raise BackendUnavailableError(
            "OpenJij backends need OpenJij: pip install 'bmfdsl[openjij]'"
        ) from exc
    return openjij


class _OpenJijBackend(BackendSampler, Initialized):
    """Relabelling, warm starts and time limits around one OpenJij sampler class."""

    sampler_class: ClassVar[str] = ""

    def _run(
        self,
        bqm: dimod.BinaryQuadraticModel,
        num_reads: Any,
        seed: Any,
        time_limit: Any,
        initial_states: Any,
        options: dict[str, Any],
    ) -> dimod.SampleSet:
        """Sample with ``options`` passed to OpenJij (None: OpenJij's own default)."""
        openjij = _import_openjij()
        sampler = getattr(openjij, self.sampler_class)()
        labels = list(bqm.variables)
        indexed = bqm.relabel_variables({v: i for i, v in enumerate(labels)}, inplace=False)
        num_reads, seed, time_limit = check_run_options(num_reads, seed, time_limit)
        states = None if initial_states is None else self.given_states(bqm, initial_states)
        reads = num_reads or (len(states) if states is not None else 1)

        def run_round(round_seed: int, deadline: float = 0.0) -> dimod.SampleSet:
            return self._sample_indexed(
                sampler, bqm, indexed, labels, reads, round_seed, states, options
            )

        if time_limit is None:
            return run_round(round_seeds(seed, 1)[0])
        return run_rounds(run_round, time_limit=time_limit, seed=seed, num_reads=reads)

    @staticmethod
    def _sample_indexed(
        sampler: Any,
        bqm: dimod.BinaryQuadraticModel,
        indexed: dimod.BinaryQuadraticModel,
        labels: list[Any],
        num_reads: int,
        seed: int,
        states: np.ndarray | None,
        params: dict[str, Any],
    ) -> dimod.SampleSet:
        # OpenJij takes one initial state per call: share the reads among the given states.
        if states is None:
            plan: list[tuple[np.ndarray | None, int]] = [(None, num_reads)]
        else:
            plan = [
                (states[i % len(states)], num_reads // len(states) + (i < num_reads % len(states)))
                for i in range(min(len(states), num_reads))
            ]
        blocks, occurrences, info = [], [], {}
        for (state, reads), call_seed in zip(plan, round_seeds(seed, len(plan)), strict=True):
            extra = {} if state is None else {"initial_state": [int(x) for x in state]}
            response = sampler.sample(indexed, num_reads=reads, seed=call_seed, **extra, **params)
            columns = [list(response.variables).index(i) for i in range(len(labels))]
            blocks.append(np.asarray(response.record.sample)[:, columns])
            occurrences.append(np.asarray(response.record.num_occurrences))
            schedule = response.info.get("schedule", {})
            info = {key: _plain(value) for key, value in schedule.items()}
        samples = np.concatenate(blocks).astype(np.int8)
        return dimod.SampleSet.from_samples_bqm(
            (samples, labels), bqm, num_occurrences=np.concatenate(occurrences), info=info
        )


def _plain(value: Any) -> Any:
    # numpy scalars -> Python numbers, so info stays JSON-friendly
    return value.item() if isinstance(value, np.generic) else value


class OpenJijSABackend(_OpenJijBackend):
    """OpenJij ``SASampler`` (classical simulated annealing).

    >>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -1.0}, {("x", "y"): -3.0}, 0, "BINARY")
    >>> float(OpenJijSABackend().sample(bqm, num_reads=2, seed=1).first.energy)
    -3.0
    """

    name: ClassVar[str] = "openjij-sa"
    sampler_class: ClassVar[str] = "SASampler"
    descriptions: ClassVar[dict[str, str]] = {
        **_COMMON,
        "beta_min": "hottest inverse temperature (None: from the model)",
        "beta_max": "coldest inverse temperature (None: from the model)",
    }

    def _sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        num_reads: int | None = None,
        seed: int | None = None,
        time_limit: float | None = None,
        initial_states: Any = None,
        num_sweeps: int = 1000,
        beta_min: float | None = None,
        beta_max: float | None = None,
    ) -> dimod.SampleSet:
        options = {"num_sweeps": num_sweeps, "beta_min": beta_min, "beta_max": beta_max}
        return self._run(bqm, num_reads, seed, time_limit, initial_states, options)


class OpenJijSQABackend(_OpenJijBackend):
    """OpenJij ``SQASampler`` (path-integral simulated quantum annealing).

    >>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -1.0}, {("x", "y"): -3.0}, 0, "BINARY")
    >>> float(OpenJijSQABackend().sample(bqm, num_reads=2, seed=1, num_sweeps=100).first.energy)
    -3.0
    """

    name: ClassVar[str] = "openjij-sqa"
    sampler_class: ClassVar[str] = "SQASampler"
    descriptions: ClassVar[dict[str, str]] = {
        **_COMMON,
        "beta": "inverse temperature",
        "gamma": "initial transverse field",
        "trotter": "number of Trotter slices",
    }

    def _sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        num_reads: int | None = None,
        seed: int | None = None,
        time_limit: float | None = None,
        initial_states: Any = None,
        num_sweeps: int = 1000,
        beta: float = 5.0,
        gamma: float = 1.0,
        trotter: int = 4,
    ) -> dimod.SampleSet:
        options = {"num_sweeps": num_sweeps, "beta": beta, "gamma": gamma, "trotter": trotter}
        sampleset = self._run(bqm, num_reads, seed, time_limit, initial_states, options)
        sampleset.info.setdefault("trotter", int(trotter))  # attempted flips scale with it
        return sampleset

"""Shared machinery of the bmfdsl backend adapters.

Every adapter subclasses :class:`BackendSampler`: it declares the keyword parameters its
``sample`` accepts (``parameters`` lists exactly those), and the base class rejects unknown
ones with an :class:`~bmfdsl.errors.UnknownNameError`, answers empty models itself and adds
``info["wall_time_s"]`` and ``info["backend"]`` to every sample set.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import dimod
import numpy as np

from bmfdsl.errors import InvalidParameterError, UnknownNameError

__all__ = [
    "BackendSampler",
    "best_samples",
    "check_num_reads",
    "check_seed",
    "check_time_limit",
    "parse_initial_states",
    "pop_run_options",
    "round_seeds",
    "run_rounds",
]


class BackendSampler(dimod.Sampler):
    """Base class of bmfdsl backends: honest ``parameters``, timing in ``info``.

    Subclasses set ``name``, ``accepted_parameters`` (name -> one-line description) and
    implement ``_sample(bqm, **params)`` for non-empty models.
    """

    name: ClassVar[str] = "backend"
    accepted_parameters: ClassVar[Mapping[str, str]] = {}

    @property
    def parameters(self) -> dict[str, list[str]]:
        """Every keyword ``sample`` accepts (and nothing else)."""
        return {name: [] for name in self.accepted_parameters}

    @property
    def properties(self) -> dict[str, Any]:
        """What the backend is and what its parameters mean."""
        return {"name": self.name, "parameter_descriptions": dict(self.accepted_parameters)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def sample(self, bqm: dimod.BinaryQuadraticModel, **params: Any) -> dimod.SampleSet:
        """Sample ``bqm``; see ``parameters`` for the accepted keywords."""
        check_parameter_names(self.name, params, self.accepted_parameters)
        params = {key: value for key, value in params.items() if value is not None}
        start = time.perf_counter()
        if bqm.num_variables == 0:
            reads = params.get("num_reads", 1)  # checked, not truncated: 2.5 is an error
            sampleset = _empty_sampleset(bqm, check_num_reads(reads) if reads else 1)
        else:
            sampleset = self._sample(bqm, **params)
        sampleset.info["wall_time_s"] = time.perf_counter() - start
        sampleset.info["backend"] = self.name
        return sampleset

    def _sample(self, bqm: dimod.BinaryQuadraticModel, **params: Any) -> dimod.SampleSet:
        raise NotImplementedError  # pragma: no cover - every adapter overrides it


def check_parameter_names(
    backend: str, params: Mapping[str, Any], known: Mapping[str, Any]
) -> None:
    """Raise :class:`UnknownNameError` for the first keyword not in ``known``.

    >>> try:
    ...     check_parameter_names("sa", {"num_sweps": 1}, {"num_sweeps": ""})
    ... except UnknownNameError as error:
    ...     print(error)
    unknown parameter 'num_sweps'; known parameters: 'num_sweeps'. Backend 'sa' accepts only these.
    """
    for key in params:
        if key not in known:
            raise UnknownNameError(
                "parameter", key, known, hint=f"Backend {backend!r} accepts only these."
            )


def check_num_reads(num_reads: Any) -> int:
    """Return ``num_reads`` as a positive int."""
    if isinstance(num_reads, bool) or not isinstance(num_reads, numbers.Integral) or num_reads < 1:
        raise InvalidParameterError(f"num_reads must be a positive integer; got {num_reads!r}")
    return int(num_reads)


def check_seed(seed: Any) -> int | None:
    """Return ``seed`` as an int in ``0..2**31-1`` (or None): the range every solver takes."""
    if seed is None:
        return None
    if (
        isinstance(seed, bool)
        or not isinstance(seed, numbers.Integral)
        or not 0 <= int(seed) < 2**31
    ):
        raise InvalidParameterError(f"seed must be an integer in [0, 2**31); got {seed!r}")
    return int(seed)


def check_time_limit(time_limit: Any) -> float:
    """Return ``time_limit`` (seconds) as a positive float."""
    if isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real) or time_limit <= 0:
        raise InvalidParameterError(
            f"time_limit must be a positive number of seconds; got {time_limit!r}"
        )
    return float(time_limit)


def pop_run_options(params: dict[str, Any]) -> tuple[int | None, int | None, float | None]:
    """Remove ``num_reads``, ``seed`` and ``time_limit`` from ``params`` and check them.

    Each is ``None`` when absent, so the wrapped sampler keeps its own default.

    >>> params = {"num_reads": 4, "time_limit": 0.5, "num_sweeps": 100}
    >>> pop_run_options(params), params
    ((4, None, 0.5), {'num_sweeps': 100})
    """
    num_reads = params.pop("num_reads", None)
    seed = params.pop("seed", None)
    time_limit = params.pop("time_limit", None)
    return (
        None if num_reads is None else check_num_reads(num_reads),
        check_seed(seed),
        None if time_limit is None else check_time_limit(time_limit),
    )


def round_seeds(seed: int | None, count: int) -> list[int]:
    """``count`` reproducible 31-bit seeds derived from ``seed`` (fresh entropy when None).

    >>> round_seeds(7, 3) == round_seeds(7, 3)
    True
    """
    return [int(s) >> 1 for s in np.random.SeedSequence(seed).generate_state(count)]


def parse_initial_states(
    bqm: dimod.BinaryQuadraticModel, initial_states: Any
) -> tuple[np.ndarray, list[Any]]:
    """Turn dimod-style ``initial_states`` into a ``(states, labels)`` pair in ``bqm``'s order.

    Accepts a mapping, a list of mappings, a SampleSet, an array with labels, ... (anything
    :func:`dimod.as_samples` accepts). Values must be of the BQM's vartype.

    >>> bqm = dimod.BinaryQuadraticModel({"a": 1, "b": 1}, {}, 0, "BINARY")
    >>> states, labels = parse_initial_states(bqm, {"b": 1, "a": 0})
    >>> states.tolist(), labels
    ([[0, 1]], ['a', 'b'])
    """
    try:
        samples, labels = dimod.as_samples(initial_states, labels_type=list)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"initial_states is not readable as samples: {exc}") from exc
    if set(labels) != set(bqm.variables):
        missing = sorted(map(str, set(bqm.variables) - set(labels)))[:5]
        raise InvalidParameterError(
            "initial_states must assign every variable of the model exactly; "
            f"missing e.g. {missing}. Use compiled.encode(U, V) to build a full state."
        )
    allowed = {0, 1} if bqm.vartype is dimod.BINARY else {-1, 1}
    if samples.size and not set(np.unique(samples).tolist()) <= allowed:
        raise InvalidParameterError(
            f"initial_states values must be in {sorted(allowed)} for a {bqm.vartype.name} model"
        )
    order = [labels.index(v) for v in bqm.variables]
    return np.ascontiguousarray(samples[:, order], dtype=np.int8), list(bqm.variables)


def best_samples(sampleset: dimod.SampleSet, num_reads: int) -> dimod.SampleSet:
    """The ``num_reads`` lowest-energy rows of ``sampleset`` (info kept)."""
    if len(sampleset) <= num_reads:
        return sampleset
    order = np.argsort(sampleset.record.energy, kind="stable")[:num_reads]
    return dimod.SampleSet(
        sampleset.record[order], sampleset.variables, sampleset.info, sampleset.vartype
    )


def run_rounds(
    run_round: Callable[[int, float], dimod.SampleSet],
    *,
    time_limit: float,
    seed: int | None,
    num_reads: int,
) -> dimod.SampleSet:
    """Repeat ``run_round(seed, deadline)`` while the next round is expected to fit.

    The first round always runs; a further one starts only while the time left is at least
    the mean duration of the rounds so far, so the limit is overrun by at most the first
    round's own excess. Returns the ``num_reads`` lowest-energy samples over all rounds;
    ``info`` gets ``num_rounds`` and ``total_reads``.
    """
    start = time.perf_counter()
    deadline = start + time_limit
    seed_sequence = np.random.SeedSequence(seed)
    rounds: list[dimod.SampleSet] = []
    while True:
        round_seed = int(seed_sequence.spawn(1)[0].generate_state(1)[0]) >> 1
        rounds.append(run_round(round_seed, deadline))
        now = time.perf_counter()
        if deadline - now < (now - start) / len(rounds):
            break
    merged = dimod.concatenate(rounds) if len(rounds) > 1 else rounds[0]
    total_reads = int(merged.record.num_occurrences.sum())
    result = best_samples(merged, num_reads)
    info = dict(rounds[-1].info)
    info.update(num_rounds=len(rounds), total_reads=total_reads)
    return dimod.SampleSet(result.record, result.variables, info, result.vartype)


def _empty_sampleset(bqm: dimod.BinaryQuadraticModel, num_reads: int) -> dimod.SampleSet:
    samples = np.empty((max(num_reads, 1), 0), dtype=np.int8)
    return dimod.SampleSet.from_samples_bqm((samples, []), bqm)

"""Shared machinery of the bmfdsl backend adapters.

Every adapter subclasses :class:`BackendSampler` and implements ``_sample(bqm, *, ...)`` with
every keyword it takes keyword-only, with its default: ``parameters`` is read from that
signature, so it lists exactly what ``sample`` accepts. The base class rejects unknown
keywords with an :class:`~bmfdsl.errors.UnknownNameError`, answers empty models itself and adds
``info["timings"]["total"]`` (wall seconds, bmfdsl's one word for time) and
``info["backend"]`` to every sample set. Adapters taking warm starts
mix in :class:`Initialized` (dimod's own, with bmfdsl's errors).
"""

from __future__ import annotations

import inspect
import numbers
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import dimod
import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.registry import check_known_names
from bmfdsl.validation import check_count, check_real


class BackendSampler(dimod.Sampler):
    """Base class of bmfdsl backends: ``parameters`` from one signature, timing in ``info``.

    Subclasses set ``name`` and ``descriptions`` (keyword -> what it means, without its
    default: ``properties`` appends the signature's) and implement
    ``_sample(bqm, *, keyword=default, ...)`` for non-empty models. A keyword passed as
    ``None`` counts as not passed: its default applies.
    """

    name: ClassVar[str] = "backend"
    descriptions: ClassVar[Mapping[str, str]] = {}

    @property
    def parameters(self) -> dict[str, list[str]]:
        """Every keyword ``sample`` accepts (and nothing else): those of ``_sample``."""
        return {name: [] for name in keyword_defaults(self._sample)}

    @property
    def properties(self) -> dict[str, Any]:
        """What the backend is and what its parameters mean (defaults included)."""
        return {
            "name": self.name,
            "parameter_descriptions": describe_parameters(self._sample, self.descriptions),
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def sample(self, bqm: dimod.BinaryQuadraticModel, **params: Any) -> dimod.SampleSet:
        """Sample ``bqm``; see ``parameters`` for the accepted keywords."""
        check_parameter_names(self.name, params, self.parameters)
        params = {key: value for key, value in params.items() if value is not None}
        start = time.perf_counter()
        if bqm.num_variables == 0:
            reads = params.get("num_reads", 1)  # checked, not truncated: 2.5 is an error
            sampleset = _empty_sampleset(bqm, check_num_reads(reads) if reads else 1)
        else:
            sampleset = self._sample(bqm, **params)
        elapsed = time.perf_counter() - start
        sampleset.info["timings"] = {**sampleset.info.get("timings", {}), "total": elapsed}
        sampleset.info["backend"] = self.name
        return sampleset

    # (*args, **params: Any) lets each adapter declare its own keyword-only signature
    def _sample(
        self, bqm: dimod.BinaryQuadraticModel, *args: Any, **params: Any
    ) -> dimod.SampleSet:
        raise NotImplementedError  # pragma: no cover - every adapter overrides it


class Initialized(dimod.Initialized):
    """dimod's :class:`~dimod.Initialized`, answering unusable warm starts with bmfdsl's errors.

    dimod reads any samples-like (a mapping, a list of them, a SampleSet, an array with
    labels, ...) and converts 0/1 states for a SPIN model, or ±1 states for a BINARY one.
    """

    def given_states(self, bqm: dimod.BinaryQuadraticModel, initial_states: Any) -> np.ndarray:
        """The states of ``initial_states``, one row each, in ``bqm``'s variable order and
        vartype (int8).

        >>> bqm = dimod.BinaryQuadraticModel({"a": 1, "b": 1}, {}, 0, "BINARY")
        >>> Initialized().given_states(bqm, {"b": 1, "a": 0}).tolist()
        [[0, 1]]
        """
        try:
            parsed = self.parse_initial_states(bqm, initial_states, initial_states_generator="none")
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(_initial_states_problem(bqm, initial_states)) from exc
        states = parsed.initial_states
        order = [states.variables.index(v) for v in bqm.variables]
        return np.ascontiguousarray(states.record.sample[:, order], dtype=np.int8)


def _initial_states_problem(bqm: dimod.BinaryQuadraticModel, initial_states: Any) -> str:
    """What is wrong with ``initial_states``, said so that the user can fix it."""
    try:
        samples, labels = dimod.as_samples(initial_states, labels_type=list)
    except (TypeError, ValueError) as exc:
        return f"initial_states is not readable as samples: {exc}"
    if set(labels) != set(bqm.variables):
        missing = sorted(map(str, set(bqm.variables) - set(labels)))[:5]
        extra = sorted(map(str, set(labels) - set(bqm.variables)))[:5]
        return (
            "initial_states must assign every variable of the model exactly; "
            f"missing e.g. {missing}, unknown e.g. {extra}. Use compiled.encode(U, V) to build "
            "a full state."
        )
    if not len(samples):
        return "initial_states holds no state; give at least one, or leave it out"
    values = np.unique(samples).tolist()[:5]
    return (
        f"initial_states values must be all 0/1 or all -1/+1 (converted to the model's "
        f"{bqm.vartype.name}); got values such as {values}"
    )


def keyword_defaults(function: Callable[..., Any]) -> dict[str, Any]:
    """The keyword-only parameters of ``function`` and their defaults, in signature order.

    >>> def f(bqm, *, num_reads=10, seed=None): ...
    >>> keyword_defaults(f)
    {'num_reads': 10, 'seed': None}
    """
    return {
        name: parameter.default
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }


def describe_parameters(
    function: Callable[..., Any], descriptions: Mapping[str, str]
) -> dict[str, str]:
    """Each keyword of ``function`` with its description and, unless None, its default.

    >>> def f(bqm, *, num_reads=10, seed=None): ...
    >>> describe_parameters(f, {"num_reads": "independent runs", "seed": "random seed"})
    {'num_reads': 'independent runs (default: 10)', 'seed': 'random seed'}
    """
    return {
        name: descriptions[name]
        if default is None
        else f"{descriptions[name]} (default: {default!r})"
        for name, default in keyword_defaults(function).items()
    }


def given_options(**options: Any) -> dict[str, Any]:
    """The options that were given (not None): what a wrapped sampler gets, so that it keeps
    its own defaults for the rest.

    >>> given_options(tenure=None, num_restarts=3)
    {'num_restarts': 3}
    """
    return {key: value for key, value in options.items() if value is not None}


def check_parameter_names(
    backend: str, params: Mapping[str, Any], known: Mapping[str, Any]
) -> None:
    """Raise :class:`UnknownNameError` for the first keyword not in ``known``.

    >>> from bmfdsl.errors import UnknownNameError
    >>> try:
    ...     check_parameter_names("sa", {"num_sweps": 1}, {"num_sweeps": ""})
    ... except UnknownNameError as error:
    ...     print(error)
    unknown parameter 'num_sweps'; known parameters: 'num_sweeps'. Backend 'sa' accepts only these.
    """
    check_known_names(params, known, hint=f"Backend {backend!r} accepts only these.")


def check_num_reads(num_reads: Any) -> int:
    """Return ``num_reads`` as a positive int."""
    return check_count(num_reads, "num_reads")


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
    """Return ``time_limit`` (seconds) as a positive finite float (NaN and infinity are
    refused: a NaN deadline is never reached)."""
    return check_real(time_limit, "time_limit", strict=True, unit=" seconds")


def check_run_options(
    num_reads: Any, seed: Any, time_limit: Any
) -> tuple[int | None, int | None, float | None]:
    """``num_reads``, ``seed`` and ``time_limit`` checked; each stays ``None`` when not given,
    so that the wrapped sampler keeps its own default.

    >>> check_run_options(4, None, 0.5)
    (4, None, 0.5)
    """
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

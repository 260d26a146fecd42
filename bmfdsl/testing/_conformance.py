"""A conformance kit for bmfdsl backends (third-party backends welcome).

It builds on :mod:`dimod.testing` (``assert_sampler_api`` and the small-BQM tests of
``load_sampler_bqm_tests``) and adds bmfdsl's own rules:

* parameters are honest: every name in ``sampler.parameters`` is accepted, and an unknown
  keyword is refused with an error that lists the valid names;
* the same ``seed`` gives the same samples;
* warm starts (``initial_states``) are honoured;
* sample sets carry timing in ``info`` (``info["timings"]["total"]`` in seconds, or a vendor's
  ``info["timing"]`` mapping);
* samples of a compiled model decode: errors recomputed, feasible energies equal errors.

Use :func:`check_sampler` for everything at once, or the single checks. A failed check
raises :class:`ConformanceError` (an ``AssertionError``), so it reads as a test failure.

>>> from bmfdsl.backends.neal import SteepestBackend
>>> check_sampler(
...     SteepestBackend(),
...     example_values={"num_reads": 2, "seed": 1, "initial_states_generator": "random",
...                     "large_sparse_opt": True, "initial_states": None},
...     run_dimod_tests=False,
... )
"""

from __future__ import annotations

import time
import unittest
from collections.abc import Callable, Mapping
from typing import Any

import dimod
import dimod.testing
import numpy as np

from bmfdsl.errors import BmfdslError
from bmfdsl.linalg import squared_error

UNKNOWN_PARAMETER = "bmfdsl_conformance_unknown_parameter"


class ConformanceError(BmfdslError, AssertionError):
    """A backend breaks a rule of the bmfdsl backend contract."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConformanceError(message)


def small_bqm(vartype: str = "BINARY", seed: int = 0) -> dimod.BinaryQuadraticModel:
    """A reproducible 6-variable random BQM with string and tuple labels."""
    rng = np.random.default_rng(seed)
    labels: list[Any] = ["a", "b", ("c", 0), ("c", 1), "U[0][0]", 5]
    linear = {v: float(x) for v, x in zip(labels, rng.normal(size=6), strict=True)}
    quadratic = {
        (labels[i], labels[j]): float(rng.normal())
        for i in range(6)
        for j in range(i + 1, 6)
        if rng.random() < 0.6
    }
    return dimod.BinaryQuadraticModel(linear, quadratic, 0.25, vartype)


def random_integer_bqm(
    num_variables: int, seed: int, vartype: str = "BINARY"
) -> dimod.BinaryQuadraticModel:
    """A reproducible BQM on ``0 .. num_variables - 1``: integer biases in [-5, 5], each pair
    coupled with probability 1/2, offset 1.5 (integer energies make ties exact).

    >>> bqm = random_integer_bqm(4, seed=0)
    >>> integral = all(float(b).is_integer() for b in bqm.linear.values())
    >>> bqm.num_variables, float(bqm.offset), integral
    (4, 1.5, True)
    """
    rng = np.random.default_rng(seed)
    linear = {v: float(rng.integers(-5, 6)) for v in range(num_variables)}
    quadratic = {
        (u, v): float(rng.integers(-5, 6))
        for u in range(num_variables)
        for v in range(u + 1, num_variables)
        if rng.random() < 0.5
    }
    return dimod.BinaryQuadraticModel(linear, quadratic, 1.5, vartype)


def two_minima_chain(length: int = 8) -> dimod.BinaryQuadraticModel:
    """A BINARY ferromagnetic chain: all-ones is the ground state, all-zeros a strict local
    minimum (every single flip from it costs energy)."""
    spin = dimod.BinaryQuadraticModel(
        {f"x{i}": -0.1 for i in range(length)},
        {(f"x{i}", f"x{i + 1}"): -2.0 for i in range(length - 1)},
        0.0,
        "SPIN",
    )
    return spin.change_vartype(dimod.BINARY, inplace=False)


def run_dimod_bqm_tests(
    sampler_factory: Callable[[], dimod.Sampler], max_num_variables: int | None = None
) -> None:
    """Run ``dimod.testing``'s API check and small-BQM tests; raise on any failure."""
    dimod.testing.assert_sampler_api(sampler_factory())
    case = dimod_test_case(sampler_factory, max_num_variables)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
    result = unittest.TestResult()
    suite.run(result)
    problems = [*result.failures, *result.errors]
    _require(
        not problems,
        f"{len(problems)} dimod conformance test(s) failed, first: "
        + (f"{problems[0][0]}: {problems[0][1][-600:]}" if problems else ""),
    )


def dimod_test_case(
    sampler_factory: Callable[[], dimod.Sampler], max_num_variables: int | None = None
) -> type[unittest.TestCase]:
    """A ``unittest.TestCase`` class with dimod's small-BQM tests for the sampler.

    Assign it to a ``Test...`` name in a test module and pytest collects it.
    """

    class DimodConformance(unittest.TestCase):
        def test_sampler_api(self) -> None:
            dimod.testing.assert_sampler_api(sampler_factory())

    decorate = dimod.testing.load_sampler_bqm_tests(
        sampler_factory, max_num_variables=max_num_variables
    )
    return decorate(DimodConformance)


def check_parameters_honest(
    sampler: dimod.Sampler,
    example_values: Mapping[str, Any],
    bqm: dimod.BinaryQuadraticModel | None = None,
) -> None:
    """Every listed parameter is accepted; an unknown one is refused, naming the valid ones.

    ``example_values`` gives a valid value for each name in ``sampler.parameters`` (``None``
    means "the built-in example": a warm start for ``initial_states``).
    """
    bqm = small_bqm() if bqm is None else bqm
    listed = set(sampler.parameters)
    missing = sorted(listed - set(example_values))
    _require(not missing, f"give an example value for parameter(s) {missing} to check them")
    extra = sorted(set(example_values) - listed)
    _require(not extra, f"example values for unlisted parameter(s) {extra}: list them or drop")
    for name in sorted(listed):
        value = example_values[name]
        if name == "initial_states" and value is None:
            value = {v: 0 if bqm.vartype is dimod.BINARY else -1 for v in bqm.variables}
        try:
            sampleset = sampler.sample(bqm, **{name: value})
        except Exception as exc:
            raise ConformanceError(
                f"parameter {name!r} is listed but sample({name}={value!r}) failed: {exc!r}"
            ) from exc
        _require(isinstance(sampleset, dimod.SampleSet), "sample must return a dimod.SampleSet")
    try:
        sampler.sample(bqm, **{UNKNOWN_PARAMETER: 1})
    except (TypeError, ValueError, KeyError) as exc:
        message = str(exc)
        unnamed = [name for name in listed if name not in message]
        _require(
            not unnamed,
            f"the error for an unknown parameter must list the valid ones; missing {unnamed}",
        )
    else:
        raise ConformanceError("an unknown parameter was silently accepted; refuse it")


def check_seed_reproducible(
    sampler: dimod.Sampler, bqm: dimod.BinaryQuadraticModel | None = None, **params: Any
) -> None:
    """The same ``seed`` gives identical samples (if ``seed`` is a parameter)."""
    if "seed" not in sampler.parameters:
        return
    bqm = small_bqm(seed=3) if bqm is None else bqm
    runs = [sampler.sample(bqm, seed=2024, **params) for _ in range(2)]
    first, second = (_sorted_rows(run, list(bqm.variables)) for run in runs)
    _require(
        np.array_equal(first, second), "two runs with the same seed returned different samples"
    )


def _sorted_rows(sampleset: dimod.SampleSet, variables: list[Any]) -> np.ndarray:
    labels = list(sampleset.variables)
    order = [labels.index(v) for v in variables]
    samples = np.asarray(sampleset.record.sample)[:, order]
    # reads may come back in any order; compare them as multisets
    return samples[np.lexsort(samples.T[::-1])] if len(samples) else samples


def check_warm_start(
    sampler: dimod.Sampler, freeze_params: Mapping[str, Any] | None = None, **params: Any
) -> None:
    """Warm starts are honoured (if ``initial_states`` is a parameter).

    On :func:`two_minima_chain`, start every read at the all-zeros local minimum. With
    ``freeze_params`` (settings that stop the solver from leaving a local minimum, e.g.
    ``num_sweeps=0``) every returned sample must be that start; without, no sample may be
    worse than it.
    """
    if "initial_states" not in sampler.parameters:
        return
    bqm = two_minima_chain()
    start = dict.fromkeys(bqm.variables, 0)
    start_energy = bqm.energy(start)
    settings = {**params, **dict(freeze_params or {})}
    if "num_reads" in sampler.parameters:
        settings.setdefault("num_reads", 1)
    # one start per read: dimod samplers fill missing reads with random states
    starts = [start] * int(settings.get("num_reads", 1))
    sampleset = sampler.sample(bqm, initial_states=starts, **settings)
    _require(len(sampleset) > 0, "a warm-started sample returned no samples")
    if freeze_params:
        for sample in sampleset.samples():
            _require(
                all(sample[v] == 0 for v in bqm.variables),
                f"frozen run did not return its warm start: {dict(sample)}",
            )
    else:
        worst = float(np.max(sampleset.record.energy))
        _require(
            bool(worst <= start_energy + 1e-9),
            f"a warm-started sample ({worst}) is worse than its start ({start_energy})",
        )


def check_timing_info(
    sampler: dimod.Sampler, bqm: dimod.BinaryQuadraticModel | None = None
) -> None:
    """``info["timings"]["total"]`` (seconds, >= 0), or a vendor's ``timing`` mapping."""
    sampleset = sampler.sample(small_bqm() if bqm is None else bqm)
    info = sampleset.info
    if "timings" in info:
        total = info["timings"].get("total") if isinstance(info["timings"], Mapping) else None
        _require(
            isinstance(total, float) and bool(total >= 0),
            "info['timings']['total'] must be a non-negative float (seconds)",
        )
    else:
        _require(isinstance(info.get("timing"), Mapping), "info must carry timings")


def check_time_limit(
    sampler: dimod.Sampler,
    bqm: dimod.BinaryQuadraticModel | None = None,
    time_limit: float = 0.3,
    slack: float = 2.0,
    **params: Any,
) -> None:
    """With ``time_limit``, a call returns within ``time_limit + slack`` seconds."""
    if "time_limit" not in sampler.parameters:
        return
    bqm = small_bqm() if bqm is None else bqm
    start = time.perf_counter()
    sampler.sample(bqm, time_limit=time_limit, **params)
    elapsed = time.perf_counter() - start
    _require(
        elapsed <= time_limit + slack, f"time_limit={time_limit} s but the call took {elapsed} s"
    )


def check_decode(
    sampler: dimod.Sampler,
    compiled: Any = None,
    weights: Mapping[str, float] | None = None,
    **params: Any,
) -> None:
    """Samples of a compiled model decode: one decoded sample per row, errors recomputed
    from U and V, and a feasible sample's energy equals its error.

    ``compiled`` defaults to Formulation 1 on a 2x3 matrix at rank 1 (11 variables) and
    ``weights`` to ``{"lam": 2.0}``.
    """
    if compiled is None:
        from bmfdsl.modeling import compile_model

        # 2 + 3 + 6 = 11 variables: small enough for exhaustive backends
        A = np.array([[1, 1, 0], [1, 0, 1]], dtype=np.int8)
        compiled = compile_model("formulation1", A, 1)
    weights = dict(weights or {"lam": 2.0})
    sampleset = sampler.sample(compiled.to_bqm(**weights), **params)
    decoded = compiled.decode(sampleset, **weights)
    _require(len(decoded) == len(sampleset), "decode must return one sample per row")
    for sample in decoded:
        _require(
            sample.error == squared_error(compiled.A, sample.U, sample.V),
            "a decoded error differs from ||A - UVᵀ||²",
        )
        if sample.feasible:
            _require(
                abs(sample.energy - sample.error) < 1e-6,
                f"a feasible sample has energy {sample.energy} != error {sample.error}",
            )


def check_sampler(
    sampler: dimod.Sampler,
    *,
    example_values: Mapping[str, Any],
    freeze_params: Mapping[str, Any] | None = None,
    sample_params: Mapping[str, Any] | None = None,
    sampler_factory: Callable[[], dimod.Sampler] | None = None,
    max_num_variables: int | None = None,
    compiled: Any = None,
    run_dimod_tests: bool = True,
) -> None:
    """Run every check of the kit on ``sampler``; raise :class:`ConformanceError` on failure.

    Args:
        sampler: the backend instance.
        example_values: a valid value for every name in ``sampler.parameters``.
        freeze_params: settings that keep a warm start unchanged (see :func:`check_warm_start`).
        sample_params: extra parameters for every other check (e.g. a short schedule).
        sampler_factory: builds fresh instances for the dimod tests (default: reuse sampler).
        max_num_variables: the largest model the dimod tests may use.
        compiled: a compiled model for :func:`check_decode` (default: a 3x3 Formulation 1).
        run_dimod_tests: also run dimod's small-BQM tests.
    """
    params = dict(sample_params or {})
    dimod.testing.assert_sampler_api(sampler)
    if run_dimod_tests:
        run_dimod_bqm_tests(sampler_factory or (lambda: sampler), max_num_variables)
    check_parameters_honest(sampler, example_values)
    check_seed_reproducible(sampler, **params)
    check_warm_start(sampler, freeze_params, **params)
    check_timing_info(sampler)
    check_decode(sampler, compiled, **params)


def check_structured_sampler(
    sampler: Any,
    *,
    example_values: Mapping[str, Any],
    sample_params: Mapping[str, Any] | None = None,
) -> None:
    """Check a :class:`~bmfdsl.modeling.StructuredSampler`; raise :class:`ConformanceError`.

    ``parameters`` match the keywords ``sample_bmf`` accepts; answers are SampleSets over the
    structure's ``U`` and ``V`` labels whose energies are the objective, one-hot where asked,
    reproducible with a seed; and ``bmfdsl.solve`` decodes them (feasible, energy == error).
    """
    import inspect

    from bmfdsl.modeling import BMFStructure, StructuredSampler, compile_model
    from bmfdsl.pipeline import solve

    params = dict(sample_params or {})
    _require(isinstance(sampler, StructuredSampler), "not a bmfdsl StructuredSampler")
    signature = inspect.signature(sampler.sample_bmf)
    accepted = {p for p in signature.parameters if p != "structure"}
    _require(
        set(sampler.parameters) == accepted,
        f"parameters {sorted(sampler.parameters)} differ from sample_bmf's {sorted(accepted)}",
    )
    missing = set(sampler.parameters) - set(example_values)
    _require(not missing, f"example_values lacks {sorted(missing)}")
    A = np.array([[1, 1, 0, 0], [1, 1, 0, 1], [0, 0, 1, 1], [0, 1, 1, 1]], dtype=np.int8)
    for one_hot in (None, "V", "U"):
        structure = BMFStructure(A, 2, one_hot)
        sampleset = sampler.sample_bmf(structure, **params)
        _require(isinstance(sampleset, dimod.SampleSet), "sample_bmf must return a SampleSet")
        _require(
            list(sampleset.variables) == structure.labels(),
            "the SampleSet's variables must be structure.labels()",
        )
        for row, energy in zip(sampleset.record.sample, sampleset.record.energy, strict=True):
            U = row[: A.shape[0] * 2].reshape(-1, 2)
            V = row[A.shape[0] * 2 :].reshape(-1, 2)
            _require(
                abs(structure.objective(U, V) - energy) < 1e-9, "energy differs from the objective"
            )
            if one_hot is not None:
                side = U if one_hot == "U" else V
                _require(bool((side.sum(axis=1) == 1).all()), f"{one_hot} rows are not one-hot")
    for name, value in example_values.items():
        sampler.sample_bmf(BMFStructure(A, 2), **{**params, name: value})
    first = sampler.sample_bmf(BMFStructure(A, 2), seed=3, **params)
    second = sampler.sample_bmf(BMFStructure(A, 2), seed=3, **params)
    _require(
        np.array_equal(first.record.sample, second.record.sample), "the same seed gave two answers"
    )
    compiled = compile_model("formulation1", A, 2, one_hot="V")
    best = solve(compiled, sampler, **params)[0]
    _require(best.feasible and best.energy == best.error, "a decoded answer is not consistent")

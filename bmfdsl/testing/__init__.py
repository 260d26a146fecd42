"""Testing helpers: the backend conformance kit (:mod:`bmfdsl.testing`)."""

from __future__ import annotations

from bmfdsl.testing._conformance import (
    ConformanceError,
    check_decode,
    check_parameters_honest,
    check_sampler,
    check_seed_reproducible,
    check_structured_sampler,
    check_time_limit,
    check_timing_info,
    check_warm_start,
    dimod_test_case,
    random_integer_bqm,
    run_dimod_bqm_tests,
    small_bqm,
    two_minima_chain,
)

__all__ = [
    "ConformanceError",
    "check_decode",
    "check_parameters_honest",
    "check_sampler",
    "check_seed_reproducible",
    "check_structured_sampler",
    "check_time_limit",
    "check_timing_info",
    "check_warm_start",
    "dimod_test_case",
    "random_integer_bqm",
    "run_dimod_bqm_tests",
    "small_bqm",
    "two_minima_chain",
]

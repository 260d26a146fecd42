"""Values the pipeline and the estimator report (issue 24, small things): each under its own
name, none of them a surprise such as ``-0.0``."""

from __future__ import annotations

import math

import numpy as np

from bmfdsl import BinaryMatrixFactorization, factorize
from bmfdsl.linalg import start_kernels

A = np.array([[1, 1, 0], [1, 1, 0], [0, 1, 1]])


def test_small_things_jit_time_has_its_own_name_outside_solve():
    start_kernels()  # numba's runtime start, which the process's first run also reports
    result = factorize(A, 2, backend="native", random_state=0)
    timings = result.info["timings"]
    jit = result.info["backend_info"]["timings"]["compile"]
    assert timings["jit"] == jit and timings["solve"] >= 0
    assert "compile" in timings  # the model's compilation keeps its name
    assert timings["total"] >= sum(v for k, v in timings.items() if k != "total")


def test_small_things_a_run_without_jit_reports_zero():
    start_kernels()
    for options in ({"method": "baseline"}, {"backend": "neal"}):  # the same keys always
        timings = factorize(A, 2, random_state=0, **options).info["timings"]
        assert timings["jit"] == 0.0 and timings["solve"] >= 0


def test_small_things_score_is_never_negative_zero():
    model = BinaryMatrixFactorization(n_components=2, random_state=0).fit(A)
    score = model.score(A)
    assert score == 0 and math.copysign(1.0, score) == 1.0

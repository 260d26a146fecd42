"""Issue 24.15: a time limit covers the lower bound and the final ALS as well as the solve.

Past the limit the bound reads only the first rows (still a valid bound, a weaker one) and
ALS stops after its first solve; without a limit nothing changes.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse

from bmfdsl import factorize, make_bernoulli
from bmfdsl.apps._datasets import make_sparse_planted
from bmfdsl.pipeline._bounds import spectral_bound
from bmfdsl.solvers import als


def test_a_passed_deadline_gives_a_weaker_but_valid_bound_on_every_route() -> None:
    dense = make_bernoulli(40_000, 30, 0.5, random_state=0)  # the Gram route, 2 chunks
    wide = make_bernoulli(600, 1500, 0.5, random_state=1)  # 8.4e6 bit counts: over this
    sparse = make_sparse_planted(140_000, 40, 3, random_state=2)  # sparse Gram, 3 slices
    for A, budget in ((dense, None), (wide, 8e6), (sparse, None)):  # wide: blocks of 5 lines
        full = spectral_bound(A, 3, max_flops=budget)
        hurried = spectral_bound(A, 3, max_flops=budget, deadline=0.0)  # long past
        assert 0 < hurried < full
    dense_sparse = scipy.sparse.csr_array(dense)
    assert spectral_bound(dense_sparse, 3) == spectral_bound(dense, 3)


def test_als_stops_after_its_first_solve_past_the_deadline() -> None:
    A = make_bernoulli(3000, 200, 0.5, random_state=3)
    rng = np.random.default_rng(0)
    U = (rng.random((3000, 4)) < 0.5).astype(np.int8)
    V = (rng.random((200, 4)) < 0.5).astype(np.int8)
    free = als(A, U, V)
    hurried = als(A, U, V, deadline=0.0)
    assert free.solves > 1
    assert hurried.solves == 1
    assert hurried.history == free.history[:2]
    assert als(A, U, V, deadline=time.perf_counter() + 600).history == free.history


def test_a_time_limited_factorization_keeps_a_valid_bound() -> None:
    A = make_bernoulli(2500, 40, 0.5, random_state=4)
    result = factorize(A, 3, random_state=0, time_limit=0.05)
    assert 0 < result.lower_bound <= result.error
    assert result.info["als_solves"] >= 1
    unlimited = factorize(A, 3, random_state=0)
    assert unlimited.lower_bound >= result.lower_bound

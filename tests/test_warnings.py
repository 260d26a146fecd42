"""Warnings a user needs: a rank beyond the practical range (once per process, with the time the
cost model expects) and a dask array handed to the estimator (which loads it whole)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from bmfdsl import BinaryMatrixFactorization, PerformanceWarning, make_exact_rank
from bmfdsl.solvers.native import PRACTICAL_MAX_RANK, exact_solve_seconds


def test_a_rank_beyond_the_practical_range_warns_once_per_process():
    # a fresh interpreter: the warning is once per process
    script = textwrap.dedent(
        f"""
        import warnings
        import numpy as np
        import bmfdsl
        A = bmfdsl.make_exact_rank(16, 16, 2, random_state=0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bmfdsl.factorize(A, {PRACTICAL_MAX_RANK}, one_hot="V", random_state=0)
            # free factors beyond enumeration take the local search: nothing to warn about
            bmfdsl.factorize(A, {PRACTICAL_MAX_RANK + 1}, method="baseline", random_state=0)
            assert not [w for w in caught if w.category is bmfdsl.PerformanceWarning]
            for _ in range(2):  # a one-hot model's free side still scores every code
                bmfdsl.factorize(A, {PRACTICAL_MAX_RANK + 1}, one_hot="V", random_state=0)
        slow = [w for w in caught if w.category is bmfdsl.PerformanceWarning]
        print(len(slow))
        print(slow[0].message)
        print(slow[0].filename)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    count, message, filename = result.stdout.strip().split("\n")
    assert count == "1"
    rank = PRACTICAL_MAX_RANK + 1
    assert f"rank {rank} is beyond the practical range (up to {PRACTICAL_MAX_RANK})" in message
    assert f"2^{rank} codes" in message
    assert f"about {exact_solve_seconds((16, 16), rank):,.1f} s" in message
    assert filename == "<string>"  # it points at the caller's line, not at bmfdsl


def test_the_expected_time_follows_the_cost_model():
    # doubling per rank (the codes dominate on a thin matrix) and linear in the rows
    assert exact_solve_seconds((100, 20), 16) > 1.9 * exact_solve_seconds((100, 20), 15)
    ratio = exact_solve_seconds((20_000, 20), 14) / exact_solve_seconds((10_000, 20), 14)
    assert 1.9 < ratio < 2.1


def test_the_estimator_warns_that_it_loads_a_dask_array():
    da = pytest.importorskip("dask.array", reason="needs the dask extra")
    A = make_exact_rank(12, 8, 2, random_state=0)
    model = BinaryMatrixFactorization(n_components=2, random_state=0)
    with pytest.warns(PerformanceWarning, match="loads a dask array fully into memory"):
        W = model.fit_transform(da.from_array(A, chunks=(6, 8)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)  # numpy input: no warning
        W_numpy = BinaryMatrixFactorization(n_components=2, random_state=0).fit_transform(A)
    assert np.array_equal(W, W_numpy)

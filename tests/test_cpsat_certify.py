"""certify= with CP-SAT's core-based search: it proves what the cheap bounds cannot, the same
bound and answer in any process, and says when it added nothing."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bmfdsl import factorize, make_bernoulli
from bmfdsl.apps import _cli as cli
from bmfdsl.errors import InvalidParameterError
from bmfdsl.linalg import squared_error

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ortools") is None, reason="OR-Tools is not installed: bmfdsl[exact]"
)

# A 12 x 12 MNIST-like digit: an ellipse drawn two pixels wide, with 6% of the pixels flipped.
DIGIT_CODE = textwrap.dedent(
    """
    import numpy as np

    def digit(size=12, seed=2):
        y, x = np.mgrid[:size, :size]
        centre = (size - 1) / 2
        ring = np.abs(np.hypot(y - centre, (x - centre) * 1.4) - size / 3) < 1.3
        flips = np.random.default_rng(seed).random((size, size)) < 0.06
        return (ring ^ flips).astype(np.int8)
    """
)
namespace: dict[str, object] = {}
exec(DIGIT_CODE, namespace)  # the same digit in this process and in the subprocesses
digit = namespace["digit"]

CERTIFY_IN_A_PROCESS = DIGIT_CODE + textwrap.dedent(
    """
    import json
    from bmfdsl import factorize

    result = factorize(digit(), 2, random_state=0, certify=2)
    print(json.dumps({
        "error": result.error,
        "bound": result.lower_bound,
        "U": result.U.tolist(),
        "V": result.V.tolist(),
        "deterministic_time": result.info["certify"]["deterministic_time"],
    }))
    """
)


def test_certify_proves_a_digit_the_cheap_bounds_cannot():
    A = digit()
    cheap = factorize(A, 2, random_state=0)
    assert not cheap.certified_optimal  # the spectral and rank-1 bounds leave a gap
    certified = factorize(A, 2, random_state=0, certify=2)
    report = certified.info["certify"]
    assert certified.certified_optimal and certified.error == certified.lower_bound
    assert certified.lower_bound > cheap.lower_bound == report["cheap_bound"]
    assert certified.info["lower_bound"]["source"] == "cp-sat"
    assert report["search"] == "core" and report["status"] == "OPTIMAL"
    assert "raised the bound" in report["outcome"] and "proven optimal" in report["outcome"]
    assert squared_error(A, certified.U, certified.V) == certified.error


def test_certify_is_deterministic_across_processes():
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", CERTIFY_IN_A_PROCESS],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    assert runs[0]["bound"] == runs[0]["error"]  # proven in both


def test_the_core_search_proves_what_the_portfolio_does_not_in_the_same_budget():
    from bmfdsl.solvers import solve_exact

    A = digit()
    start = factorize(A, 2, random_state=0)
    runs = {
        search: solve_exact(
            A,
            2,
            seconds=1,
            hint=(start.U, start.V),
            lower_bound=start.lower_bound,
            seed=0,
            search=search,
        )
        for search in ("core", "portfolio")
    }
    assert runs["core"].optimal and runs["core"].info["num_workers"] == 1
    assert runs["portfolio"].lower_bound < runs["core"].lower_bound
    assert runs["portfolio"].error == runs["core"].error  # the hint is optimal already
    with pytest.raises(InvalidParameterError, match="'core', 'portfolio'"):
        solve_exact(A, 2, seconds=1, search="cores")


def test_certify_says_when_it_found_nothing_new(capsys, tmp_path):
    A = make_bernoulli(20, 20, 0.5, random_state=0)
    result = factorize(A, 3, random_state=0, certify=0.01)
    report = result.info["certify"]
    assert report["outcome"] == "nothing new" and not report["improved"]
    assert result.lower_bound == report["cheap_bound"] < result.error
    path = tmp_path / "a.csv"
    np.savetxt(path, A, fmt="%d", delimiter=",")
    args = ["factorize", str(path), "--rank", "3", "--seed", "0", "--certify", "0.01"]
    assert cli.main(args) == 0
    assert "certify found nothing new" in capsys.readouterr().out


def test_certify_is_not_run_on_an_answer_the_cheap_bounds_proved(capsys, tmp_path):
    A = np.kron(np.eye(2, dtype=np.int8), np.ones((3, 3), dtype=np.int8))
    result = factorize(A, 2, random_state=0, certify=1)
    assert result.error == 0 and result.info["certify"]["outcome"] == "already proven"
    assert "certify" not in result.info["timings"]
    path = tmp_path / "a.csv"
    np.savetxt(path, A, fmt="%d", delimiter=",")
    assert cli.main(["factorize", str(path), "--rank", "2", "--certify", "1"]) == 0
    assert "certify not run: the cheap bounds proved it" in capsys.readouterr().out

"""Every example script runs and prints what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

EXPECTED = {
    "quickstart.py": ["U =", "V =", "factorize: ||A - UV^T||^2 = 0"],
    "custom_model.py": ["native  error   0", "rows of U one-hot: True"],
    "swap_solvers.py": ["neal", "openjij-sa", "native"],
    "lambda_sweep.py": ["best feasible setting"],
    "clustering_one_hot.py": ["each column in one cluster: True"],
    "digital_annealer.py": ["reads) + ALS: relative error 0.", "native:"],
    "impute_missing.py": ["held-out entries predicted wrong: 0 of", "native on masked-bmf"],
    "quartic_model.py": [
        "the size of formulation1: True",
        "the size of formulation2-reduced: True",
        "native error 0",
    ],
}


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_runs(script):
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=EXAMPLES.parent,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    for text in EXPECTED[script]:
        assert text in out.stdout, out.stdout


def test_every_example_is_tested():
    scripts = {p.name for p in EXAMPLES.glob("*.py")} - {"my_model.py"}
    assert scripts == set(EXPECTED)

"""Packaging: the wheel installs only ``bmfdsl*``; models/ and backends/ live under bmfdsl."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_models_and_backends_are_subpackages_of_bmfdsl(tmp_path):
    """Through the installed package only: a fresh interpreter outside the repo."""
    code = (
        "import importlib.util, pathlib, bmfdsl.models, bmfdsl.backends; "
        "print(pathlib.Path(bmfdsl.models.__file__).parent, "
        "pathlib.Path(bmfdsl.backends.__file__).parent, "
        "importlib.util.find_spec('models'), importlib.util.find_spec('backends'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    models_dir, backends_dir, models_spec, backends_spec = out.stdout.split()
    assert Path(models_dir) == REPO / "models"
    assert Path(backends_dir) == REPO / "backends"
    # No generic top-level names are installed or importable by accident.
    assert models_spec == "None" and backends_spec == "None"


def test_py_typed_marker_is_shipped():
    assert (REPO / "bmfdsl" / "py.typed").is_file()


@pytest.mark.slow
def test_wheel_contains_only_bmfdsl(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--verbose",  # shows the build backend's own output, warnings included
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # a silent build: no setuptools warning (e.g. a data folder missing from `packages`)
    assert "BuildBackendWarning" not in out.stdout + out.stderr
    assert "SetuptoolsDeprecationWarning" not in out.stdout + out.stderr
    (wheel,) = tmp_path.glob("bmfdsl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert all(top == "bmfdsl" or top.startswith("bmfdsl-") for top in tops), tops
    for expected in (
        "bmfdsl/models/formulation1.py",
        "bmfdsl/backends/neal.py",
        "bmfdsl/solvers/native/_portfolio.py",
        "bmfdsl/py.typed",
        "bmfdsl/data/paper_tables.csv",
    ):
        assert expected in names

"""Packaging: the wheel installs only ``bmfdsl*``; models/ and backends/ live under bmfdsl."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_models_and_backends_are_subpackages_of_bmfdsl():
    import bmfdsl.backends
    import bmfdsl.models

    assert Path(bmfdsl.models.__file__).parent == REPO / "models"
    assert Path(bmfdsl.backends.__file__).parent == REPO / "backends"
    # No generic top-level names are installed or importable by accident.
    for squatted in ("models", "backends"):
        assert importlib.util.find_spec(squatted) is None, f"'{squatted}' is importable"


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
            "--quiet",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("bmfdsl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert all(top == "bmfdsl" or top.startswith("bmfdsl-") for top in tops), tops
    for expected in (
        "bmfdsl/models/formulation1.py",
        "bmfdsl/backends/registry.py",
        "bmfdsl/py.typed",
        "bmfdsl/data/paper_tables.csv",
    ):
        assert expected in names

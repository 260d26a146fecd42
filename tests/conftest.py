"""Shared fixtures and helpers for the test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """The reference data folder: $BMFDSL_DATA_DIR, else ../shared/data beside the repo."""
    candidates = [os.environ.get("BMFDSL_DATA_DIR"), REPO.parent / "shared" / "data"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


@pytest.fixture
def data_dir() -> Path:
    """The reference data folder, or skip the test with the reason."""
    folder = shared_data_dir()
    if folder is None:
        pytest.skip("reference data not found: set BMFDSL_DATA_DIR or provide ../shared/data")
    return folder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("BMFDSL_RUN_CLOUD_TESTS") == "1":
        return
    skip_cloud = pytest.mark.skip(reason="cloud test: set BMFDSL_RUN_CLOUD_TESTS=1 to run it")
    for item in items:
        if "cloud" in item.keywords:
            item.add_marker(skip_cloud)

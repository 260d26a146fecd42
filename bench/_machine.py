"""What a benchmark ran on (``payload["environment"]``), and where its figures are written."""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any


def machine(blas_threads: str, **extra: Any) -> dict[str, Any]:
    """Python, numpy, platform, CPUs, BLAS threads, load and date; then ``extra``."""
    import numpy as np  # here: the benchmarks set their BLAS threads before numpy loads

    return {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "blas_threads": blas_threads,
        "load_average": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        **extra,
    }


def write_results(out: Path, name: str, payload: Any, markdown: str, indent: int = 2) -> None:
    """Write ``out/NAME.json`` (the figures) and ``out/NAME.md`` (their table), and print the
    table."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=indent) + "\n")
    (out / f"{name}.md").write_text(markdown)
    print(markdown)

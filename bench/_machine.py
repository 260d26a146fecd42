"""What a benchmark ran on, recorded beside its figures (``payload["environment"]``)."""

from __future__ import annotations

import os
import platform
import sys
import time
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

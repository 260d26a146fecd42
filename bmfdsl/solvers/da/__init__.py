"""The Digital Annealer's algorithm (parallel trials, escape offset) for any BQM.

:mod:`~bmfdsl.solvers.da._kernel` holds the numba kernels, :mod:`~bmfdsl.solvers.da._array`
runs all reads at once as array code (numpy, or CuPy on a GPU) and
:mod:`~bmfdsl.solvers.da._cuda` is the fused CUDA kernel; :mod:`~bmfdsl.solvers.da._driver`
drives them (:func:`run_da`: rounds, restarts within a time limit, replica exchange, the
device). The ``da`` backend checks its keywords, calls :func:`run_da` and builds the SampleSet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bmfdsl._lazy import lazy_exports

if TYPE_CHECKING:
    from bmfdsl.linalg import get_array_module
    from bmfdsl.solvers.da._array import ArrayRuns, available_array_devices
    from bmfdsl.solvers.da._driver import (
        DA_DEVICES,
        DA_MODES,
        DAModel,
        DARun,
        DASettings,
        default_temperatures,
        prepare_bqm,
        run_da,
    )
    from bmfdsl.solvers.da._kernel import (
        da_anneal,
        da_chunk,
        da_replica_exchange,
        da_start,
        seed_generator,
    )

__getattr__, __dir__, __all__ = lazy_exports(globals())

"""The pipeline: from a 0/1 matrix to a finished, scored :class:`~bmfdsl.result.Factorization`.

:func:`factorize` validates the data, optionally samples rows by leverage score
(:func:`sample_rows`, :func:`leverage_scores`), compiles the model, solves it on a backend
(:func:`solve`, :func:`sweep_weights`), completes and polishes with BLS/ALS and proves a lower
bound.

Imports ``solvers``, ``modeling``, ``linalg`` and the shared leaves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bmfdsl._lazy import lazy_exports

if TYPE_CHECKING:
    from bmfdsl.pipeline._factorize import factorize
    from bmfdsl.pipeline._sampling import leverage_scores, sample_rows
    from bmfdsl.pipeline._solve import SolveResult, SweepResult, SweepSetting, solve, sweep_weights

__getattr__, __dir__, __all__ = lazy_exports(globals())

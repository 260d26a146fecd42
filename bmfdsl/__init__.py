"""bmfdsl: binary matrix factorization through QUBO models.

Declare a formulation with PyQUBO, compile it once, re-weight it without recompiling, and
solve it on any registered backend by name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> module that defines it. Imported lazily so that ``import bmfdsl`` stays
# cheap and never imports a solver library.
_EXPORTS: dict[str, str] = {
    # errors
    "BmfdslError": "bmfdsl.errors",
    "InvalidMatrixError": "bmfdsl.errors",
    "InvalidParameterError": "bmfdsl.errors",
    "UnknownNameError": "bmfdsl.errors",
    "ModelDefinitionError": "bmfdsl.errors",
    "ModelTooLargeError": "bmfdsl.errors",
    "BackendUnavailableError": "bmfdsl.errors",
    "MissingCredentialsError": "bmfdsl.errors",
    "InvalidCredentialsError": "bmfdsl.errors",
    "SolverError": "bmfdsl.errors",
    # results
    "DecodedSample": "bmfdsl.result",
    "Factorization": "bmfdsl.result",
    "BMFStructure": "bmfdsl.structure",
    "StructuredSampler": "bmfdsl.structure",
    # modeling
    "compile_model": "bmfdsl.compile",
    "list_models": "bmfdsl.compile",
    "CompiledModel": "bmfdsl.compiled",
    "ModelBuilder": "bmfdsl.dsl",
    "NotFittedError": "bmfdsl.errors",
    # solving
    "list_backends": "bmfdsl.backends.registry",
    "get_backend": "bmfdsl.backends.registry",
    "register_backend": "bmfdsl.backends.registry",
    "solve": "bmfdsl._solve",
    "sweep_weights": "bmfdsl._solve",
    # pipeline
    "factorize": "bmfdsl._factorize",
    "BinaryMatrixFactorization": "bmfdsl.estimator",
    "read_matrix": "bmfdsl.io",
    "read_data": "bmfdsl.io",
    "clusters_from_factor": "bmfdsl.clusters",
    "BackendInfo": "bmfdsl.backends.registry",
    "SolveResult": "bmfdsl._solve",
    "SweepResult": "bmfdsl._solve",
    "SweepSetting": "bmfdsl._solve",
    "solve_bls": "bmfdsl.bls",
    "als": "bmfdsl._als",
    "ALSResult": "bmfdsl._als",
    "sample_rows": "bmfdsl.sampling",
    "leverage_scores": "bmfdsl.sampling",
    # data
    "make_exact_rank": "bmfdsl.datasets",
    "make_bernoulli": "bmfdsl.datasets",
    "load_mnist": "bmfdsl.datasets",
    "load_leukemia": "bmfdsl.datasets",
    "load_melanoma": "bmfdsl.datasets",
    "run_experiment": "bmfdsl.experiments.runner",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'bmfdsl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from bmfdsl._als import ALSResult, als
    from bmfdsl._factorize import factorize
    from bmfdsl._solve import SolveResult, SweepResult, SweepSetting, solve, sweep_weights
    from bmfdsl.backends.registry import BackendInfo, get_backend, list_backends, register_backend
    from bmfdsl.bls import solve_bls
    from bmfdsl.clusters import clusters_from_factor
    from bmfdsl.compile import compile_model, list_models
    from bmfdsl.compiled import CompiledModel
    from bmfdsl.datasets import (
        load_leukemia,
        load_melanoma,
        load_mnist,
        make_bernoulli,
        make_exact_rank,
    )
    from bmfdsl.dsl import ModelBuilder
    from bmfdsl.errors import (
        BackendUnavailableError,
        BmfdslError,
        InvalidCredentialsError,
        InvalidMatrixError,
        InvalidParameterError,
        MissingCredentialsError,
        ModelDefinitionError,
        ModelTooLargeError,
        NotFittedError,
        SolverError,
        UnknownNameError,
    )
    from bmfdsl.estimator import BinaryMatrixFactorization
    from bmfdsl.experiments.runner import run_experiment
    from bmfdsl.io import read_data, read_matrix
    from bmfdsl.result import DecodedSample, Factorization
    from bmfdsl.sampling import leverage_scores, sample_rows
    from bmfdsl.structure import BMFStructure, StructuredSampler

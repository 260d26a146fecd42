"""bmfdsl: binary matrix factorization through QUBO models.

Declare a formulation with the DSL, compile it once, re-weight it without recompiling, and
solve it on any registered backend by name.

The package is layered (``docs/architecture.md``); this module re-exports the public names of
its layers, each imported on first use, so that ``import bmfdsl`` stays cheap and never
imports a solver library.
"""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING

from bmfdsl._lazy import lazy_exports

__version__ = importlib.metadata.version("bmfdsl")  # one home: pyproject.toml

if TYPE_CHECKING:
    from bmfdsl.apps import (
        BinaryMatrixFactorization,
        clusters_from_factor,
        load_leukemia,
        load_melanoma,
        load_mnist,
        make_bernoulli,
        make_exact_rank,
        make_planted_blocks,
        make_sparse_planted,
        plot_factorization,
        plot_factors,
        read_data,
        read_matrix,
    )
    from bmfdsl.apps.experiments import run_experiment
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
        PerformanceWarning,
        SolverError,
        UnknownNameError,
    )
    from bmfdsl.modeling import (
        BMFStructure,
        CompiledModel,
        ModelBuilder,
        StructuredSampler,
        compile_model,
        list_models,
    )
    from bmfdsl.pipeline import (
        SolveResult,
        SweepResult,
        SweepSetting,
        factorize,
        leverage_scores,
        sample_rows,
        solve,
        sweep_weights,
    )
    from bmfdsl.result import DecodedSample, Factorization
    from bmfdsl.solvers import (
        ALSResult,
        BackendInfo,
        als,
        get_backend,
        list_backends,
        register_backend,
        solve_bls,
    )

__getattr__, __dir__, __all__ = lazy_exports(globals())

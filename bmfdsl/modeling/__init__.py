"""Declaring QUBO models and compiling them: the DSL layer.

A model script declares factors, auxiliaries, penalties and constraints on a
:class:`ModelBuilder` (symbolic arrays with numpy algebra); :func:`compile_model` runs it once
and returns a :class:`CompiledModel`, which lowers the declaration to a dimod BQM at any
penalty weights (``to_bqm``), encodes and decodes samples, emits the PyQUBO twin and carries the
verified :class:`BMFStructure` that structure-aware solvers (:class:`StructuredSampler`) take.

Imports ``linalg`` and the shared leaves; never a solver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bmfdsl._lazy import lazy_exports

if TYPE_CHECKING:
    from bmfdsl.modeling._building_blocks import factor_products, quadratized_residual
    from bmfdsl.modeling._compile import compile_model, list_models
    from bmfdsl.modeling._compiled import CompiledModel, check_weight
    from bmfdsl.modeling._declaration import Declaration
    from bmfdsl.modeling._dsl import ModelBuilder
    from bmfdsl.modeling._expr import Inequality, einsum
    from bmfdsl.modeling._penalty_weights import SUFFICIENT
    from bmfdsl.modeling._residual import squared_residual
    from bmfdsl.modeling._structure import BMFStructure, StructuredSampler
    from bmfdsl.modeling._weighted import Weight, WeightedSum

__getattr__, __dir__, __all__ = lazy_exports(globals())

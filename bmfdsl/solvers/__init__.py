"""Solvers: the backend registry, exact binary least squares, ALS and exact CP-SAT.

* :func:`list_backends`, :func:`get_backend`, :func:`register_backend`: samplers by name
  (adapters in :mod:`bmfdsl.backends`, third parties by entry point); :func:`resolve_backend`
  and the ``DEFAULT_*`` backends: how every entry point picks its sampler;
* :func:`solve_bls` and :func:`als`: the best factor for a fixed other factor, and alternating
  BLS; :func:`solve_bls_many` and :func:`als_batch`: the same for several candidates in shared
  passes over ``A``;
* :func:`solve_exact`: OR-Tools CP-SAT proofs and bounds;
* subpackages :mod:`bmfdsl.solvers.native` (the structure-aware BMF portfolio),
  :mod:`bmfdsl.solvers.da` (the Digital Annealer's algorithm) and
  :mod:`bmfdsl.solvers.methods` (the paper's classical comparison methods).

Imports ``modeling``, ``linalg`` and the shared leaves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bmfdsl._lazy import lazy_exports

if TYPE_CHECKING:
    from bmfdsl.solvers._als import ALSResult, ALSStart, als, als_batch
    from bmfdsl.solvers._bls import (
        MAX_ENUMERATION_RANK,
        solve_bls,
        solve_bls_many,
        solve_bls_with_error,
    )
    from bmfdsl.solvers._cpsat import (
        DEFAULT_NUM_WORKERS,
        DEFAULT_SEARCH,
        SEARCHES,
        check_search,
        check_seconds,
        configure_search,
        require_ortools,
        solve_exact,
    )
    from bmfdsl.solvers._registry import (
        DEFAULT_BLS_BACKEND,
        DEFAULT_BLS_PARAMETERS,
        DEFAULT_FACTORIZE_BACKEND,
        DEFAULT_SOLVE_BACKEND,
        BackendInfo,
        check_backend_available,
        get_backend,
        list_backends,
        register_backend,
        resolve_backend,
    )

__getattr__, __dir__, __all__ = lazy_exports(globals())

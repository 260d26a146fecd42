"""The structure-aware BMF solver (numba), behind the ``native`` backend.

* :func:`solve_bmf` with :class:`NativeSettings`: heat-bath row annealing, parallel tempering,
  restarts, ALS polish and optimality certificates for ``min ||A - U Vᵀ||²_F``, within a
  work budget (:func:`auto_work_limit` by default, :data:`WORK_PER_SECOND` units ~ 1 s);
  beyond rank 12 (free factors) the rank-12 answer extended greedily and polished by ALS with
  local-search row solves, so that no ``2**r`` code table is built (r = 32 on MNIST 1,000 x 784
  in about 2 s);
* :func:`solve_weighted_bmf`, :func:`weighted_als`, :func:`weighted_bls`: masked and weighted
  BMF by restarted exact weighted ALS;
* :func:`exact_rank1`: the provably optimal rank-1 factorization by Gray-code enumeration;
* :func:`solve_family` with :class:`FamilyProblem`: the rest of the BMF family (Boolean OR and
  XOR products, L1 terms, at-most/at-least-k rows) by exact row updates over the allowed
  codes, ASSO-style seeds and an iterated local search, within a work budget;
* :func:`flip_descent`: the final polish of a free answer, one bit of the short side's factor
  at a time with the other re-solved exactly (after :func:`solve_bmf`'s search, and on the
  full data's answer of the default ``factorize``);
* :func:`structure_seeds`: the NMF-threshold and cluster seeds of a whole-matrix solve (the
  pipeline's portfolio tries them on a row sample of a large matrix).

The Digital Annealer's algorithm lives beside it in :mod:`bmfdsl.solvers.da`.
"""

from bmfdsl.solvers.native._certify import exact_rank1
from bmfdsl.solvers.native._family import (
    DEFAULT_FAMILY_WORK,
    FamilyProblem,
    FamilyResult,
    polish_family,
    solve_family,
)
from bmfdsl.solvers.native._flips import FLIP_SWEEPS, FlipResult, flip_allowance, flip_descent
from bmfdsl.solvers.native._portfolio import NativeResult, compile_kernels, solve_bmf
from bmfdsl.solvers.native._seeds import (
    SEED_NAMES,
    one_blas_thread,
    process_blas_threads,
    sampled_core_work_limit,
    structure_seeds,
)
from bmfdsl.solvers.native._settings import (
    PRACTICAL_MAX_RANK,
    WORK_PER_SECOND,
    NativeSettings,
    auto_work_limit,
    exact_solve_seconds,
    portfolio_work_patience,
)
from bmfdsl.solvers.native._weighted import solve_weighted_bmf, weighted_als, weighted_bls

__all__ = [
    "DEFAULT_FAMILY_WORK",
    "FLIP_SWEEPS",
    "PRACTICAL_MAX_RANK",
    "SEED_NAMES",
    "WORK_PER_SECOND",
    "FamilyProblem",
    "FamilyResult",
    "FlipResult",
    "NativeResult",
    "NativeSettings",
    "auto_work_limit",
    "compile_kernels",
    "exact_rank1",
    "exact_solve_seconds",
    "flip_allowance",
    "flip_descent",
    "one_blas_thread",
    "polish_family",
    "portfolio_work_patience",
    "process_blas_threads",
    "sampled_core_work_limit",
    "solve_bmf",
    "solve_family",
    "solve_weighted_bmf",
    "structure_seeds",
    "weighted_als",
    "weighted_bls",
]

"""The structure-aware BMF solver (numba), behind the ``native`` backend.

* :func:`solve_bmf` with :class:`NativeSettings`: heat-bath row annealing, parallel tempering,
  restarts, ALS polish and optimality certificates for ``min ||A - U Vᵀ||²_F``, within a
  work budget (:func:`auto_work_limit` by default, :data:`WORK_PER_SECOND` units ~ 1 s);
  beyond rank 12 (free factors) the rank-12 answer extended greedily and polished by ALS with
  local-search row solves, so that no ``2**r`` code table is built (r = 32 on MNIST 1,000 x 784
  in about 2 s);
* :func:`solve_weighted_bmf`, :func:`weighted_als`: masked and weighted BMF by restarted exact
  weighted ALS;
* :func:`exact_rank1`: the provably optimal rank-1 factorization by Gray-code enumeration.

The Digital Annealer's algorithm lives beside it in :mod:`bmfdsl.solvers.da`.
"""

from bmfdsl.solvers.native._certify import exact_rank1
from bmfdsl.solvers.native._portfolio import NativeResult, compile_kernels, solve_bmf
from bmfdsl.solvers.native._settings import WORK_PER_SECOND, NativeSettings, auto_work_limit
from bmfdsl.solvers.native._weighted import solve_weighted_bmf, weighted_als

__all__ = [
    "WORK_PER_SECOND",
    "NativeResult",
    "NativeSettings",
    "auto_work_limit",
    "compile_kernels",
    "exact_rank1",
    "solve_bmf",
    "solve_weighted_bmf",
    "weighted_als",
]

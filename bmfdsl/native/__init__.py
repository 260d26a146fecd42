"""bmfdsl's native solvers (numba): the structure-aware BMF portfolio and the DA algorithm.

* :func:`solve_bmf` with :class:`NativeSettings`: heat-bath row annealing, parallel tempering,
  restarts, ALS polish and optimality certificates for ``min ||A - U Vᵀ||²_F``.
* :func:`exact_rank1`: the provably optimal rank-1 factorization by Gray-code enumeration.
* :mod:`bmfdsl.native.da_kernel`: the Digital Annealer's parallel-trial algorithm for any BQM
  (used by the ``da`` backend); :mod:`bmfdsl.native.da_array` runs it for all reads at once
  as array code (numpy, the reference) and :mod:`bmfdsl.native.da_cuda` as one fused CUDA
  kernel (CuPy, optional).
"""

from bmfdsl.native.certify import exact_rank1
from bmfdsl.native.portfolio import NativeResult, NativeSettings, compile_kernels, solve_bmf

__all__ = ["NativeResult", "NativeSettings", "compile_kernels", "exact_rank1", "solve_bmf"]

"""The Digital Annealer algorithm as one fused CUDA kernel (compiled by CuPy at first use).

The whole-array formulation of :mod:`bmfdsl.solvers.da._array` launches some twenty small
kernels per iteration; on a GPU that costs about a millisecond per iteration whatever the
number of runs (measured on an H100: 1.0-1.2 s for 1,000 iterations at 4 to 1,024 runs). Here
each run is one thread block that keeps iterating inside a single launch, the way the Digital
Annealer's hardware works: the block's threads evaluate all N trials of an iteration at once,
a block-wide reduction picks one accepted trial, and the threads update the local fields of
the flipped variable's neighbours from sparse (CSR) couplings. Measured on an H100 with
Formulation 1 (2,880-18,600 variables, 4-1,024 runs, 1,000 iterations): sparse updates were
1.2-3x faster than dense row updates and need no N x N matrix; fields in shared memory gained
5-15% at 512 threads but were up to 1.9x slower with smaller blocks at 18,600 variables x
1,024 runs (fewer blocks fit per SM) and would cap N at what fits (about 25,000 variables),
so they stay in global memory.

The algorithm is exactly that of :class:`~bmfdsl.solvers.da.ArrayRuns` (which is the CPU
reference the tests compare against): trial ``i`` is accepted when ``(ΔE_i - E_off) / T <= 30``
and ``u_i < min(1, exp(-(ΔE_i - E_off) / T))``; among the accepted, the largest ``u_i / p_i``
wins, which is a uniform choice; no acceptance raises ``E_off`` by the increment, an accepted
flip resets it to 0. The random numbers come from a counter-based hash of (seed, run,
iteration, variable), so a run's result does not depend on the block size or on how the
iterations are split into launches.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

#: CUDA C source of the fused kernel (compiled with NVRTC through ``cupy.RawModule``).
FUSED_KERNEL_SOURCE = r"""
#define DA_CUTOFF 30.0

__device__ __forceinline__ unsigned long long da_mix(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) with 53 random bits, for variable i of one (run, iteration) stream */
__device__ __forceinline__ double da_uniform(unsigned long long stream, int i) {
    unsigned long long bits = da_mix(stream + (unsigned long long)(i + 1) * 0x9E3779B97F4A7C15ULL);
    return (double)(bits >> 11) * (1.0 / 9007199254740992.0);
}

/* One block per run; blockDim.x a multiple of 32 (at most 1024). Couplings: symmetric CSR
   with a zero diagonal. x, g, best_x: R x n row-major; energy, best, offset: one per run. */
extern "C" __global__ void da_iterate(
    const int* __restrict__ indptr, const int* __restrict__ indices,
    const double* __restrict__ data, const int n,
    signed char* __restrict__ x, double* __restrict__ g, signed char* __restrict__ best_x,
    double* __restrict__ energy, double* __restrict__ best, double* __restrict__ offset,
    const double* __restrict__ betas, const int steps, const int interval,
    const double offset_increase, const unsigned long long* __restrict__ run_keys,
    const long long first_iteration)
{
    __shared__ double warp_key[32];
    __shared__ int warp_index[32];
    __shared__ int flip;           /* the variable flipped this iteration, -1 for none */
    __shared__ double flip_sign;   /* +1 for 0 -> 1, -1 for 1 -> 0 */
    __shared__ int improved;       /* the run's best energy fell: copy the state */
    __shared__ double run_energy, run_best, run_offset;

    const int run = blockIdx.x;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = (blockDim.x + 31) >> 5;
    const size_t base = (size_t)run * (size_t)n;
    signed char* xr = x + base;
    double* gr = g + base;
    signed char* br = best_x + base;
    const unsigned long long key_of_run = run_keys[run];

    if (threadIdx.x == 0) {
        run_energy = energy[run];
        run_best = best[run];
        run_offset = offset[run];
    }
    __syncthreads();

    long long iteration = first_iteration;
    for (int step = 0; step < steps; ++step) {
        const double beta = betas[step];
        for (int repeat = 0; repeat < interval; ++repeat, ++iteration) {
            const unsigned long long stream =
                da_mix(key_of_run + (unsigned long long)iteration * 0xA24BAED4963EE407ULL);
            const double off = run_offset;
            double key = -1.0;
            int index = -1;
            for (int i = threadIdx.x; i < n; i += blockDim.x) {
                const double delta = xr[i] ? -gr[i] : gr[i];
                const double excess = (delta - off) * beta;
                if (excess > DA_CUTOFF) continue;
                const double u = da_uniform(stream, i);
                double k = u;
                if (excess > 0.0) {
                    const double p = exp(-excess);
                    if (u >= p) continue;
                    k = u / p;   /* uniform on [0, 1) given acceptance */
                }
                if (k > key) { key = k; index = i; }
            }
            for (int shift = 16; shift > 0; shift >>= 1) {
                const double other_key = __shfl_down_sync(0xffffffffu, key, shift);
                const int other_index = __shfl_down_sync(0xffffffffu, index, shift);
                if (other_key > key) { key = other_key; index = other_index; }
            }
            if (lane == 0) { warp_key[warp] = key; warp_index[warp] = index; }
            __syncthreads();
            if (threadIdx.x == 0) {
                for (int w = 1; w < warps; ++w) {
                    if (warp_key[w] > key) { key = warp_key[w]; index = warp_index[w]; }
                }
                improved = 0;
                if (index >= 0) {
                    const double sign = xr[index] ? -1.0 : 1.0;
                    run_energy += sign * gr[index];
                    run_offset = 0.0;
                    flip_sign = sign;
                    if (run_energy < run_best - 1e-9) { run_best = run_energy; improved = 1; }
                    xr[index] = 1 - xr[index];
                } else {
                    run_offset += offset_increase;
                }
                flip = index;
            }
            __syncthreads();
            const int j = flip;
            if (j >= 0) {
                const double sign = flip_sign;
                const int end = indptr[j + 1];
                for (int p = indptr[j] + threadIdx.x; p < end; p += blockDim.x) {
                    gr[indices[p]] += sign * data[p];
                }
                if (improved) {
                    for (int i = threadIdx.x; i < n; i += blockDim.x) br[i] = xr[i];
                }
                __syncthreads();   /* the fields of other threads' variables changed */
            }
        }
    }
    if (threadIdx.x == 0) {
        energy[run] = run_energy;
        best[run] = run_best;
        offset[run] = run_offset;
    }
}
"""

_modules: dict[int, Any] = {}


def _kernel(cupy: ModuleType) -> Any:
    """The compiled kernel for the current CUDA device (compiled once per process; CuPy also
    caches the binary on disk)."""
    device = int(cupy.cuda.runtime.getDevice())
    if device not in _modules:
        _modules[device] = cupy.RawModule(code=FUSED_KERNEL_SOURCE, options=("--std=c++14",))
    return _modules[device].get_function("da_iterate")


def block_size(num_variables: int) -> int:
    """Threads per run: a power of two near ``num_variables / 8``, between 32 and 512 (512 was
    fastest at 2,880-18,600 variables and 4-1,024 runs on an H100).

    >>> block_size(12), block_size(960), block_size(6040)
    (32, 128, 512)
    """
    wanted = -(-num_variables // 8)
    return min(512, max(32, 1 << (wanted - 1).bit_length()))


def run_key(seed: int | None, runs: int) -> np.ndarray:
    """One 64-bit stream key per run, derived from ``seed`` (fresh entropy for ``None``).

    >>> np.array_equal(run_key(3, 4), run_key(3, 4)), run_key(3, 4).dtype
    (True, dtype('uint64'))
    """
    return np.random.default_rng(seed).integers(0, 2**63, size=runs, dtype=np.uint64)


def fused_iterate(
    cupy: ModuleType,
    state: dict[str, Any],
    betas: np.ndarray,
    interval: int,
    offset_increase: float,
    first_iteration: int,
) -> None:
    """Launch the kernel once: every run continues for ``len(betas) * interval`` iterations.

    ``state`` holds the CuPy arrays ``indptr``, ``indices`` (int32) and ``data`` (float64) of
    the symmetric CSR couplings, ``x``, ``best_x`` (R x n int8), ``g`` (R x n float64),
    ``energy``, ``best``, ``offset`` (R float64) and ``run_keys`` (R uint64); they are updated
    in place on the device (asynchronously).
    """
    runs, n = state["x"].shape
    if runs == 0 or len(betas) == 0 or n == 0:
        return
    for name in ("x", "g", "best_x"):  # the kernel takes raw pointers and assumes C order
        if state[name].shape != (runs, n) or not state[name].flags.c_contiguous:
            raise ValueError(f"state[{name!r}] must be a C-contiguous {runs} x {n} array")
    _kernel(cupy)(
        (runs,),
        (block_size(n),),
        (
            state["indptr"], state["indices"], state["data"], np.int32(n),
            state["x"], state["g"], state["best_x"], state["energy"], state["best"],
            state["offset"], cupy.asarray(betas, dtype=cupy.float64), np.int32(len(betas)),
            np.int32(interval), np.float64(offset_increase), state["run_keys"],
            np.int64(first_iteration),
        ),
    )  # fmt: skip

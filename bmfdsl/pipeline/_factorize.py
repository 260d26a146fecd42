"""The pipeline most users call: orient → sample → core solve → extend by BLS → polish by ALS
→ bound.

:func:`factorize` is one flow of stage functions, each returning its value, each timed as a
``with timer(stage):`` block (wall seconds in ``info["timings"]``). ``A`` is wrapped once at
the entrance (:func:`~bmfdsl.linalg.as_matrix`) and the wrapper, a
:class:`~bmfdsl.linalg.BinaryMatrix`, is what every stage takes: in memory, scipy sparse or a
``dask.array``, none of them asks which. The orientation (solving on ``Aᵀ`` when ``A`` is wide
and sampled) is decided once and undone once. Missing data is data too: the mask picks the
model's default, the error, the ALS and the lower bound (:class:`_Objective`), not a second
pipeline.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import inspect
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from bmfdsl import progress
from bmfdsl.errors import (
    InvalidMatrixError,
    InvalidParameterError,
    UnknownNameError,
    warn_caller,
)
from bmfdsl.linalg import (
    BinaryMatrix,
    InMemoryMatrix,
    Orientation,
    SparseMatrix,
    as_matrix,
    check_device,
    get_array_module,
    is_dask_array,
    relative_error,
    start_kernels,
)
from bmfdsl.pipeline._background import closes_background_work
from bmfdsl.pipeline._bounds import (
    BoundJob,
    LowerBound,
    Proof,
    certificate_error,
    check_certify,
    prove,
    proven_optimal,
    start_bound,
)
from bmfdsl.pipeline._strategy import (
    REPAIR_ALSO,
    SeedsAhead,
    best_distinct,
    lowest_distinct,
    portfolio_core_params,
    ranking_rows,
    repair_seeds,
    repair_start_count,
    repeats,
    screening_rows,
    shortlist,
    solved_by_seeds_only,
    start_portfolio_seeds,
    takes_thresholded_whole,
    threads_for,
    uses_portfolio,
    with_thresholded_whole,
)
from bmfdsl.registry import check_known_names, normalize_name
from bmfdsl.result import Factorization, to_jsonable
from bmfdsl.solvers import DEFAULT_FACTORIZE_BACKEND
from bmfdsl.timings import StageTimer
from bmfdsl.validation import (
    check_backend,
    check_binary_matrix,
    check_flag,
    check_mapping,
    check_mask,
    check_one_hot,
    check_random_state,
    check_rank,
    split_masked_array,
)


@closes_background_work  # a failed call leaves no bound thread, nor BLAS on one thread
def factorize(
    A: Any,
    rank: int,
    *,
    method: str = "qubo",
    model: Any = "formulation1",
    backend: Any = None,
    one_hot: str | None = None,
    weights: Mapping[str, float | str] | None = None,
    mask: Any = None,
    sample_rows: int | str | None = None,
    als: bool = True,
    random_state: Any = None,
    certify: float | None = None,
    model_data: Mapping[str, Any] | None = None,
    device: str = "cpu",
    **backend_params: Any,
) -> Factorization:
    """Factorize a 0/1 matrix ``A ≈ U Vᵀ`` with binary ``U`` (m x r) and ``V`` (n x r).

    Args:
        A: the 0/1 data matrix: array-like, scipy sparse (kept sparse when sampled), or a
            ``dask.array`` (see below).
        rank: the target rank ``r``, ``1 <= r <= min(m, n)``.
        method: ``"qubo"`` (compile ``model`` and solve it on ``backend``), or one of the
            paper's comparison methods ``"baseline"``, ``"thresholded"``, ``"penalized"``.
        model: the QUBO model (registered name or script path; ``method="qubo"`` only).
        backend: a registered backend name or a ``dimod.Sampler``; ``None`` picks the best
            local solver (``"native"``).
        one_hot: ``"V"`` to put every column of A in exactly one cluster (``"U"``: rows).
        weights: penalty weights for the model, by the names it declares (default: the
            model's own defaults, e.g. the paper's λ = 1 for ``lam``); ``"sufficient"``
            for a value proved to make every minimum feasible.
        mask: 0/1 array of A's shape, 1 = observed: missing data (a numpy masked array's
            mask is used the same way; giving both is an error). Only observed entries count
            in the error; the default model becomes ``"masked-bmf"`` (a custom model reads the
            mask as ``model.data["mask"]``), ALS is the masked one and the lower bound comes from
            fully observed blocks. ``method="qubo"`` only, on an in-memory matrix without
            ``sample_rows`` (a sparse one is densified).
        sample_rows: ``None`` (use all rows), an int ``s`` (the paper's leverage-score
            sampling of ``s`` rows, ``r <= s <=`` the long side's rows, then BLS for the full
            ``U``) or ``"auto"`` (sample ``s = max(30, r, min(n, 20 r))`` rows when the long
            side has at least 2,000 rows, else use all; ``n``: the short side). For a
            ``dask.array`` input ``None`` means ``"auto"``. The default solve also tries the
            portfolio's seeds (``pipeline/_strategy.py``: the comparison methods on the core,
            NMF-threshold and cluster seeds on a uniform row sample) and keeps the best answer
            on the full data (``info["portfolio"]``).
        als: polish with alternating BLS (at most 20 solves, stop after 2 without gain).
        random_state: seed for every random choice (sampling, solver seeds, restarts): the
            same seed gives bit-identical results in any process under any load, unless a
            wall-clock ``time_limit`` is passed to the backend.
        certify: seconds for the exact engine (OR-Tools CP-SAT, ``bmfdsl[exact]``), started
            from the answer: it proves the answer optimal, raises the lower bound, or finds a
            better answer (then returned). Deterministic: see :mod:`bmfdsl.solvers._cpsat`.
        model_data: further data the model reads as ``model.data[...]``, e.g. ``{"k": 2}`` for
            ``at-most-k-bmf`` (``method="qubo"`` only, without ``sample_rows``: arrays in it
            are not sampled; the mask goes in ``mask=``).
        device: where the full-data BLS and ALS of integer BMF score their codes:
            ``"cpu"`` (default), ``"gpu"`` (CuPy on a CUDA GPU, ``bmfdsl[gpu]``) or
            ``"numpy"`` (the GPU's array code on the CPU); see
            :func:`bmfdsl.solvers.solve_bls`. The full-data BLS and ALS give the same
            answer on every device; the core solve, the seeds, a masked or family model's
            polish and the bounds stay on the CPU, except on a backend that has a ``device``
            parameter of its own (``da``), which gets it too (the DA's reads on another
            device draw differently, so its answer may differ). Reported as
            ``info["device"]``.
        **backend_params: passed to the backend's ``sample`` (``num_reads``, ``time_limit``...).

    Returns:
        A :class:`~bmfdsl.result.Factorization` with per-stage timings in ``info["timings"]``
        (wall seconds: ``compile`` is the model's compilation, ``jit`` numba's runtime start
        and a backend's kernel compilation, both once per process, taken out of the stages)
        and a proven ``lower_bound`` (cheap bounds always, see ``pipeline/_bounds.py``; a masked
        factorization's counts observed entries only). A masked factorization's
        ``info["als_solves"]`` is ``None`` (the masked ALS does not count its solves).
        ``info["storage"]``: how ``A`` was held, ``"dense"``, ``"sparse"`` (a CSR pattern) or
        ``"dask"``. A sampled run on the CPU takes the form its stages run faster on, with the
        same answer: dense from 15% ones up, sparse under 3%, else the form passed in.

    Memory: with sampling, every pass over ``A`` (leverage scores, BLS, ALS, errors) works in
    row chunks, so beyond ``A`` itself only ``O(m r)`` results and fixed-size chunk buffers are
    held. A ``dask.array`` ``A`` (any scheduler, including a distributed cluster) is never
    loaded whole: its row blocks are widened to span all columns (``n`` must be small, or
    ``m`` when ``A`` is wide), leverage scores come from ``AᵀA`` summed over the blocks, only
    the ``s`` sampled rows are gathered for the core solve, and BLS and ALS run blockwise; the
    factors come back as numpy arrays. A dask input is always sampled (``"auto"`` unless
    ``sample_rows`` says otherwise), except one whose long side has fewer than 2,000 rows:
    that one is small and is loaded and factorized in memory. A wide input that is sampled is
    solved, extended and polished as ``Aᵀ ≈ V Uᵀ`` (its first ALS solve is then for ``U``).

    A scipy sparse ``A`` (e.g. recommender data: 200,000 x 5,000 at 1% density is 1 GB as
    dense ``int8``, about 50 MB as this CSR) stays sparse through a sampled run: it is checked
    without densifying, leverage scores come from the sparse ``AᵀA``, only the ``s`` sampled
    rows are made dense for the core solve, BLS and ALS use ``A V`` and ``Aᵀ U`` (``O(nnz r)``
    passes) and the error is ``||A||² - 2 Σ(A ∘ UVᵀ) + ||UVᵀ||²``; the lower bounds use sparse
    Gram products. Without sampling (``sample_rows=None``, the default) the core solve takes
    all of ``A``, which the solvers need dense: the input is then densified once (refused
    with :class:`~bmfdsl.errors.ModelTooLargeError` beyond 2 GiB dense), so pass
    ``sample_rows="auto"`` (or a number) for a large sparse matrix. Either way the result is
    the one the same matrix gives as a dense array (same seed, same ``U``, ``V``, error and
    bound). ``certify`` and ``mask`` densify (both are for small matrices).

    >>> import numpy as np
    >>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 1, 1]])
    >>> result = factorize(A, 2, random_state=0)
    >>> result.error, result.relative_error
    (0, 0.0)
    """
    timer = StageTimer()
    started = time.perf_counter()
    als = check_flag(als, "als")
    device = check_device(device)
    get_array_module(device)  # "gpu" without CuPy or a GPU fails here, not after the solve
    check_backend(backend)
    weights = check_mapping(weights, "weights", "{'lam': 2.0}") or None
    A, mask = split_masked_array(A, mask)
    if mask is not None:
        _check_mask_options(A, method, one_hot, weights, sample_rows, certify, backend_params)
    runtime_start = start_kernels()  # reported in "jit", not in the stage it falls in
    data, s = _load(A, rank, sample_rows, device)
    rank = check_rank(rank, data.shape)
    one_hot = check_one_hot(one_hot)
    method_key = _check_method(method, one_hot, weights, backend_params)
    if method_key != "qubo" and backend is not None:
        raise InvalidParameterError(
            f"method {method_key!r} runs on its own, not on a backend; drop backend= (or use "
            "method='qubo' to solve on it)"
        )
    model_data = _check_model_data(model_data, method_key, s)
    objective = _Objective(None if mask is None else check_mask(mask, data.shape))
    _check_backend_seed(backend_params, random_state)
    rng = check_random_state(random_state)
    certify = check_certify(certify, in_memory=data.in_memory)
    whole = data = objective.observed_part(data)  # whole: before orienting
    info: dict[str, Any] = {"method": method_key, "rank": rank, "shape": list(data.shape)}
    info["device"] = device
    info.update(objective.describe())

    # Sampling works on the long side: a wide A is solved as Aᵀ ≈ V Uᵀ.
    orientation = Orientation(transposed=s is not None and data.shape[1] > data.shape[0])
    data = orientation.matrix(data)
    side = orientation.side(one_hot)
    info.update(data.layout())
    core = _core(data, s, rank, rng, timer)
    if s is not None:
        info.update(sampled_rows=s, transposed=orientation.transposed)
    rank_core = check_rank(rank, core.shape)

    progress.stage(f"{method_key} solve on {core.shape[0]}x{core.shape[1]}")
    seeds_ahead: SeedsAhead | None = None
    bound_job: BoundJob | None = None
    if method_key == "qubo":
        model = objective.default_model(model)
        with timer("compile"):
            compiled = _compile(
                model, core, rank_core, side, weights, {**model_data, **objective.model_data()}
            )
        if orientation.transposed:
            _check_transposable(compiled[0])
        method_rng = copy.deepcopy(rng)  # the state method=... would hand its method
        core_params = dict(backend_params)
        if uses_portfolio(method_key, model, backend, one_hot, weights, objective.observed):
            core_params = portfolio_core_params(
                core_params,
                core.shape,
                rank_core,
                sampled=s is not None,
                ones=data.total,
                seeds_only=s is None and solved_by_seeds_only(core, data.total),
            )
            # the seeds start beside the core solve (under a time limit none starts late)
            if _time_limit_end(backend_params, started) is None:
                seeds_ahead = start_portfolio_seeds(  # in threads, beside the core solve
                    data, core, rank_core, method_rng, sampled=s is not None
                )
                if s is not None and mask is None:  # the portfolio's model is integer BMF
                    # early, so done by the finish (BLAS on one thread meanwhile: the
                    # caller's stages then make only exact integer products)
                    bound_job = start_bound(whole, rank, hold_blas=True)
        with timer("solve"):
            solution = _solve_compiled(compiled, backend, rng, core_params, device)
        if seeds_ahead is not None and s is None:
            if not objective.proves_optimal(solution.info):
                with timer("seeds"):  # done by now: the full data's stages get BLAS back
                    seeds_ahead.result()
            else:  # the core's answer is proven optimal: no seed is finished
                seeds_ahead.close()
    else:
        with timer("solve"):
            solution = _solve_by_method(method_key, core, rank_core, rng)
    info.update(solution.info)
    time_limit_end = _time_limit_end(backend_params, started)
    if bound_job is None and _integer_bmf(solution) and mask is None and time_limit_end is None:
        bound_job = start_bound(whole, rank)  # computed while the full data is solved
    # Out of memory a pass over A costs the most: the core's answer is then finished with the
    # seeds (those that screen well), in the same passes (the same answers: each ends alone).
    finish_later = not data.in_memory and seeds_ahead is not None
    finish_core = partial(
        _extend_and_polish,
        data, solution, objective, s is not None, side, als, timer, info, time_limit_end, device,
    )  # fmt: skip
    answer = None if finish_later else finish_core()
    certified_error = objective.certified_error(info) if s is None else None  # native's, on A
    in_time = time_limit_end is None or time.perf_counter() < time_limit_end
    portfolio = uses_portfolio(method_key, model, backend, one_hot, weights, objective.observed)
    if portfolio and certified_error is None and in_time:
        answers = _best_of_seeds(
            data,
            core,
            rank_core,
            method_rng,
            answer,
            solution.V,
            objective,
            s,
            als,
            timer,
            info,
            deadline=time_limit_end,
            device=device,
            seeds_ahead=seeds_ahead,
        )
        U, V, error = _finish_by_flips(data, answers, backend_params, timer, info, time_limit_end)
    else:
        if seeds_ahead is not None:
            seeds_ahead.close()
        U, V, error = finish_core() if answer is None else answer
    U, V = orientation.factors(U, V)
    integer = _integer_bmf(solution)
    if not (integer or (certify is None and _integer_product_error(solution))):
        proof = _unbounded(solution, U, V, error, certify)
    else:
        proof = prove(
            whole,
            rank,
            U,
            V,
            error,
            one_hot=one_hot,
            certified_error=certified_error if integer else None,  # a family's is its objective's
            certify=certify,
            seed=_seed_from(rng),
            mask=objective.observed,
            deadline=_bounds_deadline(time_limit_end, started),
            background=bound_job,
        )
    info.update(lower_bound=proof.bound.to_info(), **({"certify": proof.info} if certify else {}))
    # "total" includes the proof; a backend's JIT compilation gets its own name
    info["timings"] = _with_jit({**proof.timings, **timer.timings()}, solution.info, runtime_start)
    return Factorization(
        U=proof.U,
        V=proof.V,
        error=int(proof.error),
        relative_error=relative_error(int(proof.error), data.total),
        broken_constraints=solution.broken,
        info=info,
        lower_bound=proof.bound.value,
    )


class _Answer(NamedTuple):
    """A full-data answer the portfolio finished, and the start it came from."""

    name: str
    U: np.ndarray
    V: np.ndarray
    error: int


#: How many of the portfolio's best answers (distinct columns) the final flip descent takes,
#: keeping the lowest end (:func:`_finish_by_flips`): the answer best before it can end above
#: another (apb, k = 12: 564 -> 558 from the second best, 561 -> 560 from the best), and
#: more repair rounds had left 4 of 52 real-data answers worse that way. On the UCI sets a
#: descent takes about 15 ms.
FLIP_STARTS = 3


def _finish_by_flips(
    data: BinaryMatrix,
    answers: list[_Answer],
    backend_params: Mapping[str, Any],
    timer: StageTimer,
    info: dict[str, Any],
    deadline: float | None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The lowest end of the native solver's final flip descent on the full data
    (:func:`~bmfdsl.solvers.native.flip_descent`: one bit of the short side's factor at a
    time, the other re-solved exactly) from each of the portfolio's best ``answers`` (lowest
    first; the first on ties), where ``A`` is in memory and small enough
    (:data:`FLIP_MAX_CELLS`), else the first answer. ``info["flip_descent"]`` says what it
    did: the kept descent's flips, the first answer's error before (``error_before``) and the
    answer it started from (``start``, also ``info["portfolio"]["chosen"]``). The caller's
    ``flip_sweeps`` (the native backend's keyword) sets its sweeps, 0 none; under a
    ``time_limit`` each descent takes at most half the time left."""
    from bmfdsl.solvers.native import FLIP_SWEEPS, auto_work_limit, flip_allowance, flip_descent

    first = answers[0]
    sweeps = backend_params.get("flip_sweeps")
    sweeps = FLIP_SWEEPS if sweeps is None else sweeps
    m, n = data.shape
    if not data.in_memory or m * n > FLIP_MAX_CELLS or first.error == 0:
        return first.U, first.V, first.error
    kept = (first.U, first.V, first.error)
    work_limit = auto_work_limit((m, n))
    dense = None  # made once for every descent (a sparse A's is a copy)
    for answer in answers:
        allowance = flip_allowance((m, n), first.U.shape[1], work_limit, sweeps, deadline)
        if allowance <= 0:
            break
        dense = data.dense() if dense is None else dense
        with timer("als"):
            result = flip_descent(dense, answer.U, answer.V, allowance)
        if result is None:
            break
        if answer is first or result.error < kept[2]:
            info["flip_descent"] = {
                "flips": result.flips,
                "error_before": first.error,
                "start": answer.name,
            }
        if result.error < kept[2]:
            kept = (result.U, result.V, result.error)
            info["portfolio"]["chosen"] = answer.name
    return kept


def _with_jit(
    timings: dict[str, float], solve_info: Mapping[str, Any], runtime_start: float
) -> dict[str, float]:
    """``timings`` with the backend's kernel compilation (its ``timings["compile"]``, inside
    the solve stage: numba's JIT, once per process) moved out of ``solve`` into ``jit``, plus
    numba's ``runtime_start`` (0.0 when neither happened in this call)."""
    backend_timings = (solve_info.get("backend_info") or {}).get("timings") or {}
    jit = backend_timings.get("compile")
    jit = float(jit) if isinstance(jit, int | float) else 0.0
    return {**timings, "solve": max(0.0, timings["solve"] - jit), "jit": runtime_start + jit}


def _extend_and_polish(
    data: BinaryMatrix,
    solution: _CoreSolution,
    objective: _Objective,
    extend: bool,
    side: str | None,
    als: bool,
    timer: StageTimer,
    info: dict[str, Any],
    deadline: float | None = None,
    device: str = "cpu",
) -> tuple[np.ndarray, np.ndarray, int]:
    """The core's answer on all of ``A``: ``U`` extended by BLS (``extend``: sampled runs), then
    ALS (under a time limit: no ALS solve after ``deadline`` but the first), scored on
    ``device``.

    Errors come from the BLS/ALS solves themselves (exact integer statistics): no m x n
    temporaries on the hot path. Records ``error_before_als`` and ``als_solves`` in ``info``.
    """
    U, V = solution.U, solution.V
    family = solution.model.family if solution.model is not None else None
    if family is not None or (solution.model is not None and solution.model.outside):
        return _extend_and_polish_model(data, solution, extend, als, timer, info, deadline)
    if objective.observed is None:
        known = None if extend else solution.error  # the core is all of A: decoding scored it
        (done,) = _finish(
            data, [(None if extend else U, V)], [known], side, als, timer, deadline, device
        )
        info.update(_core_finish_info(done, als))
        return done.U, done.V, done.error
    error = objective.error(data, U, V)  # masked: never sampled, so the core is all of A
    info["error_before_als"] = error
    if als:
        progress.stage("ALS polish")
        with timer("als"):
            U, V, error, info["als_solves"] = objective.polish(data, U, V, side)
        info["polish"] = "als"
    return U, V, int(error)


@dataclass(frozen=True)
class _Finished:
    """A start finished on the full data: the polished pair, its error, the error before the
    ALS (the extended or given start's) and the ALS solves (``None`` without ALS)."""

    U: np.ndarray
    V: np.ndarray
    error: int
    error_before_als: int
    als_solves: int | None


def _core_finish_info(done: _Finished, als: bool) -> dict[str, Any]:
    """What ``info`` reports of the core's answer finished on the full data (wherever it is
    finished: alone, or with the seeds)."""
    if not als:
        return {"error_before_als": done.error_before_als}
    return {
        "error_before_als": done.error_before_als,
        "als_solves": done.als_solves,
        "polish": "als",
    }


def _finish(
    data: BinaryMatrix,
    starts: list[tuple[np.ndarray | None, np.ndarray]],
    known_errors: list[int | None],
    side: str | None,
    als: bool,
    timer: StageTimer,
    deadline: float | None,
    device: str,
) -> list[_Finished]:
    """Integer BMF starts ``(U, V)`` finished on all of ``A`` together, each as it would be
    alone: ``U`` of a start without one by exact BLS from its ``V`` (one pass over ``A`` for
    all of them), then ALS (one pass per half-step for all that still run; no ALS solve after
    ``deadline`` but the first). ``known_errors``: a given pair's error where known."""
    from bmfdsl.solvers import ALSStart, als_batch, solve_bls_many
    from bmfdsl.solvers.native import one_blas_thread

    Us = [U for U, _ in starts]
    Vs = [V for _, V in starts]
    errors = list(known_errors)
    crosses: list[np.ndarray | None] = [None] * len(starts)
    extended = [index for index, U in enumerate(Us) if U is None]
    if extended:
        with timer("bls"):
            solved = solve_bls_many(
                data, [Vs[index] for index in extended], one_hot=side == "U", device=device
            )
        for index, (U, error, cross) in zip(extended, solved, strict=True):
            Us[index], errors[index], crosses[index] = U, error, cross
    full = [(U, V) for U, V in zip(Us, Vs, strict=True) if U is not None]
    if not als:
        scored = [
            data.squared_error(U, V) if error is None else int(error)
            for (U, V), error in zip(full, errors, strict=True)
        ]
        return [_Finished(U, V, e, e, None) for (U, V), e in zip(full, scored, strict=True)]
    progress.stage("ALS polish")
    # several starts (the shortlisted seeds, after the seed threads are done): batches side
    # by side on the idle cores, each on one BLAS thread (exact products: the same answers)
    threads = threads_for(len(full)) if data.in_memory and device == "cpu" else 1
    with timer("als"), one_blas_thread() if threads > 1 else contextlib.nullcontext():
        polished = als_batch(
            data,
            [
                ALSStart(U, V, error, cross)
                for (U, V), error, cross in zip(full, errors, crosses, strict=True)
            ],
            one_hot=side,
            deadline=deadline,
            device=device,
            threads=threads,
        )
    return [
        _Finished(result.U, result.V, result.error, result.history[0], result.solves)
        for result in polished
    ]


def _integer_bmf(solution: _CoreSolution) -> bool:
    """Whether the error is integer BMF's (a method's, or a model claiming plain, masked or
    weighted integer BMF): only then do the integer lower bounds hold."""
    model = solution.model
    return model is None or (model.structure is not None and model.family is None)


def _integer_product_error(solution: _CoreSolution) -> bool:
    """Whether a family member's reported error is ``||A - U Vᵀ||²`` of the integer product
    on every entry (row limits and an L1 term restrict or re-rank its answers but report the
    residual alone): integer BMF's bounds, which hold for every real rank-``r`` product, then
    hold for it too (not its certificate, which proves its own objective)."""
    family = None if solution.model is None else solution.model.family
    return family is not None and family.product == "sum" and family.effective_weights is None


def _unbounded(
    solution: _CoreSolution, U: np.ndarray, V: np.ndarray, error: int, certify: float | None
) -> Proof:
    """The answer with the trivial bound 0: integer BMF's bounds do not hold for the model."""
    if certify is not None:
        name = solution.model.compiled.model_name if solution.model is not None else "?"
        raise InvalidParameterError(
            f"certify= proves integer BMF (||A - UVᵀ||²); model {name!r} has another error: "
            "drop certify"
        )
    return Proof(U, V, int(error), LowerBound(0, "zero"), {}, {})


def _extend_and_polish_model(
    data: BinaryMatrix,
    solution: _CoreSolution,
    extend: bool,
    als: bool,
    timer: StageTimer,
    info: dict[str, Any],
    deadline: float | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """A model beyond integer BMF: its own error, and its own row updates as the polish (a
    model in the BMF family), or no polish at all (a model outside it: the integer product's
    ALS would optimise another objective). ``info["polish"]`` says which. Under a time limit
    no row update starts after ``deadline`` but the first."""
    model = solution.model
    assert model is not None
    U, V = solution.U, solution.V
    family = model.family
    if family is None:
        if extend:
            raise InvalidParameterError(
                f"sample_rows needs a model with a BMF structure (model.declare_bmf) to extend "
                f"the core's answer to every row; {model.compiled.model_name!r} declares none: "
                "pass sample_rows=None"
            )
        info["polish"] = "none: the model declares no BMF structure (model.declare_bmf)"
        error = model.error(U, V)
        info["error_before_als"] = error
        return U, V, error
    from bmfdsl.solvers.native import FamilyProblem, polish_family

    family = replace(family, A=data.dense())  # all rows (the mask, if any, is A's already)
    problem = FamilyProblem.of(family)
    info["product"] = family.product
    if extend:  # the full U given the core's V: one exact update of U
        with timer("bls"):
            U = polish_family(problem, np.zeros((data.shape[0], V.shape[1])), V, work_limit=0).U
    info["error_before_als"] = round(family.error(U, V))
    if als:
        progress.stage("polish by the model's row updates")
        with timer("als"):
            polished = polish_family(problem, U, V, deadline=deadline)
        U, V = polished.U, polished.V
        info["als_solves"] = polished.info["updates"]
        info["polish"] = f"row updates of the model's own objective ({family.product} product)"
    return U, V, round(family.error(U, V))


@dataclass(frozen=True)
class _ModelError:
    """The compiled model's own error (Boolean for Boolean BMF, observed entries only when
    masked), and its structure when it is in the BMF family but not plain integer BMF."""

    compiled: Any
    structure: Any  # BMFStructure with resolved weights, or None
    weights: Mapping[str, float] = field(default_factory=dict)  # the weights solved with

    @property
    def family(self) -> Any:
        """The structure, when the model's own row updates (not integer ALS) polish it: every
        member but plain or masked integer BMF (entry weights given as model data included;
        factorize's ``mask=`` is the objective's own, for the masked ALS)."""
        structure = self.structure
        if structure is None or (structure.is_integer_bmf and structure.entry_weights is None):
            return None
        return structure

    @property
    def outside(self) -> bool:
        """True for a model without a BMF structure."""
        return self.structure is None

    def error(self, U: np.ndarray, V: np.ndarray) -> int:
        """The model's error of ``(U, V)`` (rounded: reported as an integer)."""
        value = self.compiled.errors(U[None], V[None], weights=dict(self.weights) or None)[0]
        return round(float(value))


def _best_of_seeds(
    data: BinaryMatrix,
    core: np.ndarray,
    rank: int,
    method_rng: np.random.Generator,
    answer: tuple[np.ndarray, np.ndarray, int] | None,
    core_V: np.ndarray,
    objective: _Objective,
    s: int | None,
    als: bool,
    timer: StageTimer,
    info: dict[str, Any],
    deadline: float | None = None,
    device: str = "cpu",
    seeds_ahead: SeedsAhead | None = None,
) -> list[_Answer]:
    """The best full-data answers of the core solve's and the portfolio's seeds
    (:mod:`bmfdsl.pipeline._strategy`), each extended and polished as the core solve's was
    (under a time limit: no seed is started after ``deadline``). ``seeds_ahead``: the seeds
    already started beside the core solve (the ``seeds`` stage then times only the wait).
    ``answer``: the core solve's answer finished on the full data, or ``None`` to finish it
    here in the same passes as the shortlisted seeds (data out of memory: the ``"seconds"``
    below then include the core's finish); ``core_V``: its ``V`` as the solve returned it,
    which the seeds are screened against. Returns the :data:`FLIP_STARTS` lowest-error
    answers with distinct columns, lowest first (the final flip descent takes each,
    :func:`_finish_by_flips`).

    ``info["portfolio"]`` lists the seeds tried, the final error of each one finished on the
    full data (large data: those that beat the core's answer on the screening sample) and the
    one chosen (the first of the lowest error,
    the core solve's on ties). Its ``"seconds"``: the wall time the seeds took the call, that
    is every ``seeds`` stage (an unsampled run's wait for them after the core solve
    included) and the seeds' finish on the full data (their time in threads beside the core
    solve is the solve's).
    """
    errors: dict[str, int] = {} if answer is None else {"core": answer[2]}
    progress.stage("portfolio seeds")
    started = timer.timings()
    # thresholded on all of A cannot stop at a deadline: never under a time limit
    whole = (
        deadline is None
        and answer is not None
        and takes_thresholded_whole(core.shape, data.total, answer[2], sampled=s is not None)
    )
    with timer("seeds"):
        if seeds_ahead is None:
            seeds_ahead = start_portfolio_seeds(data, core, rank, method_rng, sampled=s is not None)
        seed_set = seeds_ahead.result()
        if whole:  # decided by the core's error: computed now, in this thread
            seed_set = with_thresholded_whole(seed_set, core, rank, method_rng)
        finished_seeds = shortlist(
            seed_set,
            core_V,
            # without ALS its error on all of A is BLS's, not comparable with a screening's
            answer_on_all=None if answer is None or not als else (*answer[1:], data.shape[0]),
        )
    names = [seed.name for seed in finished_seeds]
    starts = [(seed.U, seed.V) for seed in finished_seeds]
    if answer is None:  # the core's answer first, finished in the same passes
        names, starts = ["core", *names], [(None, core_V), *starts]
    elif deadline is not None and time.perf_counter() > deadline:
        names, starts = [], []
    # all finished together: a start without U gets it by exact BLS from its V
    results = (
        _finish(data, starts, [None] * len(starts), None, als, timer, deadline, device)
        if starts
        else []
    )
    ends = [] if answer is None else [_Answer("core", *answer)]  # every finished answer
    also_repaired = None  # REPAIR_ALSO's answer, where it was finished
    for name, done in zip(names, results, strict=True):
        errors[name] = done.error
        ends.append(_Answer(name, done.U, done.V, done.error))
        if name == REPAIR_ALSO:
            also_repaired = done.V
        if name == "core":
            info.update(_core_finish_info(done, als))
    assert ends  # the core's answer at least
    in_time = deadline is None or time.perf_counter() <= deadline
    with timer("seeds"):  # components the best answers missed, judged where seeds were
        rows = screening_rows(data, seed_set, rank) if in_time else None
        repairs = (
            []
            if rows is None
            else repair_seeds(
                rows,
                best_distinct(
                    [(end.error, end.V) for end in ends],
                    repair_start_count(data.shape, seed_set),
                    also=also_repaired,
                ),
                deadline=deadline,
                ranked_on=ranking_rows(data, seed_set, rank),
                crossover=seed_set.recombine,
            )
        )
    repairs_found = [repair for repair in repairs if repair is not None]
    if repairs_found and (deadline is None or time.perf_counter() <= deadline):
        starts = [(None, repair.V) for repair in repairs_found]  # finished in the same passes
        repaired = _finish(data, starts, [None] * len(starts), None, als, timer, deadline, device)
        for repair, done in zip(repairs_found, repaired, strict=True):
            errors[repair.name] = done.error
            ends.append(_Answer(repair.name, done.U, done.V, done.error))
    for seed, twin in zip(seed_set.seeds, repeats(seed_set.seeds), strict=True):
        if twin in errors:  # the same start, not finished twice: the same end
            errors[seed.name] = errors[twin]
    # the lowest first, the first on ties (the core's answer, then the seeds in order)
    best = [ends[k] for k in lowest_distinct([(end.error, end.V) for end in ends], FLIP_STARTS)]
    finished = timer.timings()
    waited = started.get("seeds", 0.0)  # an unsampled run's wait, before the full data's stages
    info["portfolio"] = {
        "seeds": [seed.name for seed in seed_set.seeds],
        "errors": errors,
        "chosen": best[0].name,
        "seconds": waited + finished["total"] - started["total"],
    }
    return best


@dataclass(frozen=True)
class _Objective:
    """What the error counts: every entry of ``A``, or (missing data) the observed ones only.

    The mask is data: it picks the default model, what the model is compiled with, the error,
    the ALS and the lower bound; the flow of :func:`factorize` is the same either way.
    """

    observed: np.ndarray | None = None  # int8, 1 = observed

    def observed_part(self, data: BinaryMatrix) -> BinaryMatrix:
        """``A`` with its unobserved entries zeroed: they carry no information."""
        if self.observed is None:
            return data
        return InMemoryMatrix(data.dense() * self.observed)

    def describe(self) -> dict[str, Any]:
        """What ``info`` reports about the objective: the number of observed entries."""
        return {} if self.observed is None else {"observed": int(self.observed.sum())}

    def default_model(self, model: Any) -> Any:
        """The masked model replaces the default one; a model given by name or path stays."""
        if self.observed is None:
            return model
        return "masked-bmf" if model == "formulation1" else model

    def model_data(self) -> dict[str, Any]:
        """The data the model is compiled with (a custom model reads ``data["mask"]``)."""
        return {} if self.observed is None else {"mask": self.observed}

    def certified_error(self, info: Mapping[str, Any]) -> int | None:
        """A backend's proven optimum on ``A`` (a masked run proves none of its own)."""
        return certificate_error(info) if self.observed is None else None

    def proves_optimal(self, info: Mapping[str, Any]) -> bool:
        """Whether a backend proved its answer optimal on ``A`` (the unsampled core)."""
        return self.observed is None and proven_optimal(info)

    def error(self, data: BinaryMatrix, U: np.ndarray, V: np.ndarray) -> int:
        """The error of ``(U, V)``: ``||A - U Vᵀ||²_F``, on observed entries when masked."""
        if self.observed is None:
            return data.squared_error(U, V)
        from bmfdsl.linalg import weighted_squared_error

        return round(weighted_squared_error(data.dense(), U, V, self.observed.astype(np.float64)))

    def polish(
        self, data: BinaryMatrix, U: np.ndarray, V: np.ndarray, side: str | None
    ) -> tuple[np.ndarray, np.ndarray, int, None]:
        """The masked ALS from ``(U, V)``: the best pair, its error and ``None`` (it does not
        count its solves; it runs on the CPU whatever the ``device``). Unmasked runs are
        finished by :func:`_finish`."""
        assert self.observed is not None
        from bmfdsl.solvers.native import weighted_als

        weights = self.observed.astype(np.float64)
        U, V, error = weighted_als(data.dense(), weights, U, V, side)
        return np.asarray(U, dtype=np.int8), np.asarray(V, dtype=np.int8), round(error), None


@dataclass(frozen=True)
class _CoreSolution:
    """The factors of the core matrix, the constraints they break and what to report."""

    U: np.ndarray
    V: np.ndarray
    broken: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    model: _ModelError | None = None  # None: a comparison method (integer BMF)
    error: int | None = None  # ||core - U Vᵀ||² when decoding computed it


def _load(A: Any, rank: Any, sample_rows: Any, device: str) -> tuple[BinaryMatrix, int | None]:
    """The validated data and the number of rows to sample (``None``: use all rows).

    A dask input samples with ``"auto"`` by default; one too small to sample is loaded.
    Without sampling the core solve takes all of ``A`` dense, so a sparse input is densified
    here, once. A sampled run takes the form its stages are fastest on, whatever the user
    passed: a dense copy of a sparse input with many ones
    (:meth:`~bmfdsl.linalg.SparseMatrix.dense_pays`), the CSR pattern of a dense input with
    few (:meth:`~bmfdsl.linalg.InMemoryMatrix.sparse_pays`; on the CPU only: a dense ``A``'s
    products are those that run on a GPU). The answers are the same either way.
    """
    if not is_dask_array(A):
        data = as_matrix(A)
        m, n = data.shape
        s = _sample_size(sample_rows, max(m, n), min(m, n), check_rank(rank, (m, n)))
        if isinstance(data, SparseMatrix) and (s is None or data.dense_pays()):
            data = InMemoryMatrix(data.dense())
        elif (
            s is not None
            and device == "cpu"
            and isinstance(data, InMemoryMatrix)
            and data.sparse_pays()
        ):
            data = data.pattern()
        return data, s
    if A.ndim != 2 or 0 in A.shape:
        raise InvalidMatrixError(f"A must be a non-empty 2-D array; got shape {A.shape}")
    if any(np.isnan(size) for size in A.shape):
        raise InvalidMatrixError(
            f"A is a dask array of unknown chunk sizes (shape {A.shape}); call "
            "A.compute_chunk_sizes() (or A.rechunk) first"
        )
    m, n = (int(size) for size in A.shape)
    wanted = "auto" if sample_rows is None else sample_rows
    s = _sample_size(wanted, max(m, n), min(m, n), check_rank(rank, (m, n)))
    if s is None:
        # Fewer than 2,000 rows on the long side: at most 4M entries, cheap to hold in memory.
        return InMemoryMatrix(check_binary_matrix(np.asarray(A.compute()))), None
    # validated once, every later pass reuses it; the sampling and the bound read its Gram
    return as_matrix(A, with_gram=True), s


def _sample_size(sample_rows: Any, m: int, n: int, rank: int) -> int | None:
    """The number of rows to sample, or ``None`` to work on the full matrix."""
    from bmfdsl.pipeline._sampling import choose_sample_size

    if sample_rows is None:
        return None
    if sample_rows == "auto":
        s = choose_sample_size(m, n, rank)
        return None if s >= m else s
    if (
        isinstance(sample_rows, bool)
        or not isinstance(sample_rows, int | np.integer)
        or sample_rows < 1
    ):
        raise InvalidParameterError(
            f"sample_rows must be None, 'auto' or a positive integer; got {sample_rows!r}"
        )
    if sample_rows < rank:
        raise InvalidParameterError(
            f"sample_rows={sample_rows} is smaller than the rank {rank}; sample at least r rows"
        )
    if sample_rows > m:
        raise InvalidParameterError(
            f"sample_rows={sample_rows} is larger than the {m} rows of the long side; pass at "
            "most that many, 'auto' or None (all rows)"
        )
    return int(sample_rows)


def _check_method(
    method: Any,
    one_hot: str | None,
    weights: Mapping[str, float | str] | None,
    backend_params: Mapping[str, Any],
) -> str:
    from bmfdsl.solvers.methods import METHODS

    known = ("qubo", *METHODS)  # the built-in comparison methods and installed plug-ins
    method_key = normalize_name(method, "method") if isinstance(method, str) else None
    if method_key not in known:
        raise UnknownNameError("method", method, known)
    if method_key != "qubo" and (backend_params or weights):
        raise InvalidParameterError(
            f"method {method_key!r} takes no backend parameters or weights; got "
            f"{sorted({*backend_params, *(weights or {})})}"
        )
    if method_key != "qubo" and one_hot is not None:
        raise InvalidParameterError(
            f"method {method_key!r} has no one-hot constraint; use method='qubo' with one_hot"
        )
    return method_key


def _check_transposable(compiled: Any) -> None:
    """A wide sampled ``A`` is solved as ``Aᵀ ≈ V Uᵀ``, which swaps the factors: refuse a
    model whose claim treats U and V differently (row limits, L1 weights), which the swap
    would apply to the wrong factor."""
    structure = compiled.structure
    if structure is None:
        return
    limits_u, limits_v = structure.row_limits
    if limits_u != limits_v or structure.l1[0] != structure.l1[1]:
        raise InvalidParameterError(
            f"model {compiled.model_name!r} limits U and V differently, and a wide A is "
            "sampled on its long side (solved as Aᵀ ≈ V Uᵀ): pass sample_rows=None, or "
            "factorize A.T and swap the factors"
        )


def _check_model_data(model_data: Any, method: str, sample_rows: int | None) -> dict[str, Any]:
    """``factorize``'s ``model_data=``: a mapping of names to the model's further data."""
    if model_data is None:
        return {}
    if not isinstance(model_data, Mapping) or not all(isinstance(key, str) for key in model_data):
        raise InvalidParameterError(
            f"model_data must be a dict of names to values, e.g. {{'k': 2}}; got {model_data!r:.60}"
        )
    if method != "qubo":
        raise InvalidParameterError(f"method {method!r} reads no model data; drop model_data=")
    if sample_rows is not None:
        raise InvalidParameterError(
            "model_data= goes to the model compiled on the sampled core, which its arrays would "
            "not match: pass sample_rows=None"
        )
    if "mask" in model_data:
        raise InvalidParameterError("give the mask as factorize(..., mask=M), not in model_data=")
    return dict(model_data)


#: Largest ``A`` (entries) whose full-data answer gets the native solver's flip descent
#: (:func:`_finish_by_flips`): its dense copy stays small, and so does the table of every row's
#: code errors (at most ``MAX_FLIP_TABLE`` entries, which the descent checks itself).
FLIP_MAX_CELLS = 2**24
#: With a ``time_limit``, the lower bound gets what is left of it, and at least this share.
BOUNDS_TIME_SHARE = 0.05


def _time_limit_end(backend_params: Mapping[str, Any], started: float) -> float | None:
    """When a backend's ``time_limit`` (seconds) ends, counted from the start of
    ``factorize``; ``None`` without one (every stage's budget then counts work)."""
    limit = backend_params.get("time_limit")
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not math.isfinite(limit):
        return None
    return started + float(limit) if limit > 0 else None


def _bounds_deadline(time_limit_end: float | None, started: float) -> float | None:
    """When the lower bound stops under a time limit: the limit's end, or a share of the
    limit from now when it has passed (the bound is then weaker, but there is one)."""
    if time_limit_end is None:
        return None
    share = BOUNDS_TIME_SHARE * (time_limit_end - started)
    return max(time_limit_end, time.perf_counter() + share)


def _seed_from(rng: np.random.Generator) -> int:
    return int(rng.integers(2**31 - 1))


def _core(
    data: BinaryMatrix, s: int | None, rank: int, rng: np.random.Generator, timer: StageTimer
) -> np.ndarray:
    """The matrix the core solve takes: ``s`` sampled rows, or all of ``A`` (in memory).

    A matrix with more than 256 columns is sampled by rank-``r`` leverage scores from the
    top eigenpairs of ``AᵀA``; that Gram matrix is timed as its own stage (``"gram"``), since
    the lower bound reuses it (and the same Lanczos pairs). On more rows the scores come from
    a uniform subsample's Gram instead (see ``pipeline/_sampling.py``), and the bound's own
    ``AᵀA`` and eigenvalues are computed in the background during the solve
    (:func:`start_bound`).
    """
    from bmfdsl.pipeline._sampling import shares_gram, subsamples_scores

    if s is None:
        return data.dense()
    if shares_gram(data, rank) and not subsamples_scores(data, rank):
        with timer("gram"):
            data.gram  # noqa: B018 (computed once and kept by the wrapper)
    with timer("sampling"):
        return _sample(data, s, rank, rng)


def _sample(data: BinaryMatrix, s: int, rank: int, rng: np.random.Generator) -> np.ndarray:
    """The core: ``s`` rows drawn by leverage score (the paper's sampling; rank-``r`` scores
    beyond 256 columns)."""
    from bmfdsl.pipeline._sampling import sample_rows as draw_rows

    rows, _ = draw_rows(data, s, rank=rank, random_state=rng)
    return data.take_rows(rows)


def _solve_by_method(
    method: str, core: np.ndarray, rank: int, rng: np.random.Generator
) -> _CoreSolution:
    """One of the paper's comparison methods on the core."""
    from bmfdsl.solvers.methods import get_method

    U, V = get_method(method)(core, rank, random_state=rng)
    return _CoreSolution(U=np.asarray(U, dtype=np.int8), V=np.asarray(V, dtype=np.int8))


def _compile(
    model: Any,
    core: np.ndarray,
    rank: int,
    one_hot: str | None,
    weights: Mapping[str, float | str] | None,
    data: Mapping[str, Any],
) -> tuple[Any, dict[str, Any]]:
    """The compiled model on the core and the weights to solve it with (defaults: the
    model's own)."""
    from bmfdsl.modeling import compile_model

    compiled = compile_model(model, core, rank, one_hot=one_hot, data=data)
    chosen = dict(weights or {})
    check_known_names(sorted(chosen), compiled.weight_names, kind="weight")
    return compiled, chosen


def _solve_compiled(
    compiled_and_weights: tuple[Any, dict[str, Any]],
    backend: Any,
    rng: np.random.Generator,
    backend_params: Mapping[str, Any],
    device: str = "cpu",
) -> _CoreSolution:
    """Solve the compiled model on the backend; the best decoded sample. A backend with a
    ``device`` parameter (``da``) runs on a non-default ``device`` too."""
    from bmfdsl.modeling import StructuredSampler
    from bmfdsl.pipeline._solve import solve
    from bmfdsl.solvers import resolve_backend

    compiled, weights = compiled_and_weights
    name, sampler = resolve_backend(backend, default=DEFAULT_FACTORIZE_BACKEND)
    params = dict(backend_params)
    if "seed" in sampler.parameters and "seed" not in params:
        params["seed"] = _seed_from(rng)
    if device != "cpu" and "device" in sampler.parameters:
        params["device"] = device
    if not isinstance(sampler, StructuredSampler) and params.get("time_limit") is None:
        _warn_if_large(compiled, name, timed="time_limit" in sampler.parameters)
    try:
        decoded = solve(compiled, sampler, **weights, **params)
    except UnknownNameError as unknown:
        if unknown.kind != "keyword" or unknown.name not in backend_params:
            raise
        raise _with_own_keywords(unknown) from None
    best = decoded[0]
    info = {
        "model": compiled.model_name,
        "backend": name if backend is None or isinstance(backend, str) else type(backend).__name__,
        "weights": decoded.info.get("weights"),
        "energy": best.energy,
        "backend_info": to_jsonable(decoded.info.get("backend_info", {})),
        "structure_aware": isinstance(sampler, StructuredSampler),
    }
    U = np.asarray(best.U, dtype=np.int8)
    V = np.asarray(best.V, dtype=np.int8)
    structure = compiled.structure
    if structure is not None:
        structure = structure.resolved(decoded.info.get("weights") or {})
    plain = structure is not None and structure.is_plain and structure.is_integer_bmf
    error = best.error if plain and isinstance(best.error, int | np.integer) else None
    return _CoreSolution(
        U=U,
        V=V,
        broken=dict(best.broken),
        info=info,
        model=_ModelError(compiled, structure, dict(decoded.info.get("weights") or {})),
        error=None if error is None else int(error),
    )


#: Variables from which a generic (BQM) backend's solve without a time limit is warned about:
#: ``da`` took 2.4 s on a 60 x 20 rank-3 model (3,840 variables), 23 s on a 120 x 30 one
#: (11,250) and about 16 minutes on a 300 x 60 rank-4 one (73,440); ``neal`` took 1.4 s on
#: the 120 x 30 one but left an exact rank-3 matrix at error 709.
GENERIC_BACKEND_WARN_VARIABLES = 10_000


def _warn_if_large(compiled: Any, backend: str, *, timed: bool) -> None:
    """Warn (:class:`~bmfdsl.errors.PerformanceWarning`) when a generic backend is about to
    search a model of :data:`GENERIC_BACKEND_WARN_VARIABLES` variables or more, saying how to
    make it smaller or bounded (``time_limit=`` where the backend takes one: ``timed``)."""
    from bmfdsl.errors import PerformanceWarning

    variables = compiled.num_variables
    if variables >= GENERIC_BACKEND_WARN_VARIABLES:
        m, n = compiled.A.shape
        bounded = "pass time_limit=..., " if timed else ""
        warn_caller(
            f"backend {backend!r} searches all {variables:,} variables of model "
            f"{compiled.model_name!r} on {m} x {n} rows and columns: at this size generic "
            "samplers leave answers far from the optimum and some take minutes. Solve fewer "
            f"rows (sample_rows='auto', the paper's row sampling, or a smaller count), "
            f"{bounded}or use backend='native', which solves the structure directly",
            PerformanceWarning,
        )


def _check_backend_seed(backend_params: Mapping[str, Any], random_state: Any) -> None:
    """Refuse ``seed=`` without ``random_state``: it would seed the backend's solve alone,
    while the sampling, the portfolio's seeds and the polish drew fresh entropy (three calls
    with ``seed=0`` gave three answers).

    >>> _check_backend_seed({"seed": 0}, None)
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidParameterError: seed=0 seeds only the backend's solve; ...
    >>> _check_backend_seed({"seed": 0}, 1)  # both given: the backend gets seed 0
    """
    seed = backend_params.get("seed")
    if seed is not None and random_state is None:
        raise InvalidParameterError(
            f"seed={seed!r} seeds only the backend's solve; factorize's sampling, seeds and "
            "polish draw from random_state, which is None (fresh entropy each call): pass "
            f"random_state={seed!r} for a reproducible answer (it seeds the backend too)"
        )


#: factorize's own keywords, which a mistyped one is matched against too.
_FACTORIZE_KEYWORDS = tuple(
    name
    for name in inspect.signature(factorize.__wrapped__).parameters  # type: ignore[attr-defined]
    if name not in ("A", "rank", "backend_params")
)


def _with_own_keywords(error: UnknownNameError) -> UnknownNameError:
    """A backend's unknown-keyword error for a keyword given to :func:`factorize`, with
    factorize's own keywords listed and matched as well (``random_seed`` ->
    ``random_state``)."""
    known = [*_FACTORIZE_KEYWORDS, *error.known]
    close = difflib.get_close_matches(str(error.name), known, n=1)
    guess = f"Did you mean {close[0]!r}? " if close and "did you mean" not in error.hint else ""
    return UnknownNameError("keyword", error.name, known, hint=guess + error.hint)


def _check_mask_options(
    A: Any,
    method: Any,
    one_hot: Any,
    weights: Mapping[str, float | str] | None,
    sample_rows: Any,
    certify: Any,
    backend_params: Mapping[str, Any],
) -> None:
    """Refuse what missing data does not support, before any work on ``A``."""
    if certify is not None:
        raise InvalidParameterError("certify= is not available with a mask (missing data)")
    method_key = _check_method(method, check_one_hot(one_hot), weights, backend_params)
    if is_dask_array(A) or sample_rows is not None or method_key != "qubo":
        raise InvalidParameterError(
            "mask= works with method='qubo' on an in-memory matrix without sample_rows"
        )

"""The pipeline most users call: sampling → core solve → BLS for the full factor → ALS."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from bmfdsl.bounds import certificate_error, check_certify, prove
from bmfdsl.errors import InvalidMatrixError, InvalidParameterError, UnknownNameError
from bmfdsl.result import Factorization, relative_error, squared_error, to_jsonable
from bmfdsl.validation import check_binary_matrix, check_random_state, check_rank

__all__ = ["DEFAULT_BACKEND", "DEFAULT_WEIGHTS", "METHOD_NAMES", "factorize"]

#: The best local solver: structure-aware, no account needed.
DEFAULT_BACKEND = "native"
#: The paper's penalty weight (λ = 1 in all its experiments).
DEFAULT_WEIGHTS: dict[str, float] = {"lam": 1.0}
#: ``method`` values: the QUBO pipeline and the paper's comparison methods.
METHOD_NAMES = ("qubo", "baseline", "thresholded", "penalized")


def _check_one_hot(one_hot: Any) -> str | None:
    if one_hot is None:
        return None
    if isinstance(one_hot, str) and one_hot.upper() in ("U", "V"):
        return one_hot.upper()
    raise InvalidParameterError(f"one_hot must be None, 'U' or 'V'; got {one_hot!r}")


def _sample_size(sample_rows: Any, m: int, n: int, rank: int) -> int | None:
    """The number of rows to sample, or ``None`` to work on the full matrix."""
    from bmfdsl.sampling import choose_sample_size

    if sample_rows is None:
        return None
    if sample_rows == "auto":
        s = choose_sample_size(m, n, rank)
        return None if s >= m else s
    if isinstance(sample_rows, bool) or not isinstance(sample_rows, int | np.integer):
        raise InvalidParameterError(
            f"sample_rows must be None, 'auto' or a positive integer; got {sample_rows!r}"
        )
    if not rank <= sample_rows:
        raise InvalidParameterError(
            f"sample_rows={sample_rows} is smaller than the rank {rank}; sample at least r rows"
        )
    return int(sample_rows)


def _seed_from(rng: np.random.Generator) -> int:
    return int(rng.integers(2**31 - 1))


def factorize(
    A: Any,
    rank: int,
    *,
    method: str = "qubo",
    model: Any = "formulation1",
    backend: Any = None,
    one_hot: str | None = None,
    weights: Mapping[str, float] | None = None,
    sample_rows: int | str | None = None,
    als: bool = True,
    random_state: Any = None,
    certify: float | None = None,
    **backend_params: Any,
) -> Factorization:
    """Factorize a 0/1 matrix ``A ≈ U Vᵀ`` with binary ``U`` (m x r) and ``V`` (n x r).

    Args:
        A: the 0/1 data matrix: array-like, scipy sparse, or a ``dask.array`` (see below).
        rank: the target rank ``r``, ``1 <= r <= min(m, n)``.
        method: ``"qubo"`` (compile ``model`` and solve it on ``backend``), or one of the
            paper's comparison methods ``"baseline"``, ``"thresholded"``, ``"penalized"``.
        model: the QUBO model (registered name or script path; ``method="qubo"`` only).
        backend: a registered backend name or a ``dimod.Sampler``; ``None`` picks the best
            local solver (``"native"``).
        one_hot: ``"V"`` to put every column of A in exactly one cluster (``"U"``: rows).
        weights: penalty weights for the model (default ``{"lam": 1.0}``, the paper's λ).
        sample_rows: ``None`` (use all rows), an int ``s`` (the paper's leverage-score
            sampling of ``s`` rows, then BLS for the full ``U``) or ``"auto"`` (sample
            ``s = max(30, r)`` rows when the long side has at least 2,000 rows, else use all).
            For a ``dask.array`` input ``None`` means ``"auto"``.
        als: polish with alternating BLS (at most 20 solves, stop after 2 without gain).
        random_state: seed for every random choice (sampling, solver seeds, restarts).
        certify: seconds for the exact engine (OR-Tools CP-SAT, ``bmfdsl[exact]``), started
            from the answer: it proves the answer optimal, raises the lower bound, or finds a
            better answer (then returned). Deterministic: see :mod:`bmfdsl.cpsat`.
        **backend_params: passed to the backend's ``sample`` (``num_reads``, ``time_limit``...).

    Returns:
        A :class:`~bmfdsl.result.Factorization` with per-stage timings in ``info["timings"]``
        and a proven ``lower_bound`` (cheap bounds always, see :mod:`bmfdsl.bounds`).

    Memory: with sampling, every pass over ``A`` (leverage scores, BLS, ALS, errors) works in
    row chunks, so beyond ``A`` itself only ``O(m r)`` results and fixed-size chunk buffers are
    held. A ``dask.array`` ``A`` (any scheduler, including a distributed cluster) is never
    loaded whole: its row blocks are widened to span all columns (``n`` must be small, or
    ``m`` when ``A`` is wide), leverage scores come from ``AᵀA`` summed over the blocks, only
    the ``s`` sampled rows are gathered for the core solve, and BLS and ALS run blockwise; the
    factors come back as numpy arrays. A dask input is always sampled (``"auto"`` unless
    ``sample_rows`` says otherwise), except one whose long side has fewer than 2,000 rows:
    that one is small and is loaded and factorized in memory. Wide dask inputs are polished
    by ALS on ``Aᵀ`` (the first solve is then for ``U``).

    >>> import numpy as np
    >>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 1, 1]])
    >>> result = factorize(A, 2, random_state=0)
    >>> result.error, result.relative_error
    (0, 0.0)
    """
    start = time.perf_counter()
    blockwise = _is_dask_array(A)
    if blockwise:
        A, sample_rows = _prepare_dask(A, rank, sample_rows)
        blockwise = not isinstance(A, np.ndarray)
    else:
        A = check_binary_matrix(A)
    rank = check_rank(rank, A.shape)
    one_hot = _check_one_hot(one_hot)
    method_key = str(method).strip().lower()
    if method_key not in METHOD_NAMES:
        raise UnknownNameError("method", method, METHOD_NAMES)
    if method_key != "qubo" and (backend_params or weights):
        raise InvalidParameterError(
            f"method {method_key!r} takes no backend parameters or weights; got "
            f"{sorted({*backend_params, *(weights or {})})}"
        )
    if method_key != "qubo" and one_hot is not None:
        raise InvalidParameterError(
            f"method {method_key!r} has no one-hot constraint; use method='qubo' with one_hot"
        )
    rng = check_random_state(random_state)
    certify = check_certify(certify, in_memory=not blockwise)
    timings: dict[str, float] = {}
    info: dict[str, Any] = {"method": method_key, "rank": rank, "shape": list(A.shape)}

    # Sampling works on the long side: transpose when A is wide (n >> m).
    m, n = A.shape
    s = _sample_size(sample_rows, max(m, n), min(m, n), rank)
    transposed = s is not None and n > m
    data: Any = A.T if transposed else A
    if blockwise:
        from bmfdsl._als import _DaskData

        data = _DaskData(data)  # validated once; every later pass reuses it
        info["dask_blocks"] = len(data.A.chunks[0])
    side = {"U": "V", "V": "U"}.get(one_hot or "") if transposed else one_hot
    core = data
    if s is not None:
        from bmfdsl.sampling import sample_rows as draw_rows

        stage = time.perf_counter()
        rows, _ = draw_rows(data, s, random_state=rng)
        core = data.take_rows(rows) if blockwise else np.ascontiguousarray(data[rows])
        rank_core = check_rank(rank, core.shape)
        timings["sampling"] = time.perf_counter() - stage
        info["sampled_rows"] = int(s)
        info["transposed"] = transposed
    else:
        rank_core = rank

    broken: dict[str, int] = {}
    if method_key == "qubo":
        U, V, broken = _solve_qubo(
            core, rank_core, model, backend, side, weights, rng, backend_params, timings, info
        )
    else:
        from bmfdsl.methods import get_method

        stage = time.perf_counter()
        U, V = get_method(method_key)(core, rank_core, random_state=rng)
        timings["solve"] = time.perf_counter() - stage
    U = np.asarray(U, dtype=np.int8)
    V = np.asarray(V, dtype=np.int8)

    # Errors come from the BLS/ALS solves themselves (exact integer statistics): no m x n
    # temporaries on the hot path.
    if s is not None:
        from bmfdsl.bls import solve_bls_with_error

        stage = time.perf_counter()
        U, error = solve_bls_with_error(data, V, one_hot=side == "U")
        timings["bls"] = time.perf_counter() - stage
    else:
        error = squared_error(A, U, V)
    if transposed and not blockwise:
        U, V = V, U
    info["error_before_als"] = error

    if als:
        from bmfdsl._als import als as alternating

        stage = time.perf_counter()
        if blockwise:  # ALS on the tall orientation: the row blocks span every column
            polished = alternating(data, U, V, one_hot=side)
        else:
            polished = alternating(A, U, V, one_hot=one_hot)
        U, V, error = polished.U, polished.V, polished.error
        timings["als"] = time.perf_counter() - stage
        info["als_solves"] = polished.solves
    if transposed and blockwise:
        U, V = V, U
    proof = prove(
        A,
        rank,
        U,
        V,
        int(error),
        one_hot=one_hot,
        certified_error=certificate_error(info) if s is None else None,  # native's, on A
        certify=certify,
        seed=_seed_from(rng),
    )
    U, V, error = proof.U, proof.V, proof.error
    timings.update(proof.timings)
    info.update(lower_bound=proof.bound.to_info(), **({"certify": proof.info} if certify else {}))

    timings["total"] = time.perf_counter() - start
    info["timings"] = timings
    info["total_time"] = timings["total"]
    return Factorization(
        U=U,
        V=V,
        error=int(error),
        relative_error=relative_error(int(error), data.total if blockwise else A),
        broken_constraints=broken,
        info=info,
        lower_bound=proof.bound.value,
    )


def _is_dask_array(A: Any) -> bool:
    return type(A).__module__.split(".")[0] == "dask" and hasattr(A, "map_blocks")


def _prepare_dask(A: Any, rank: Any, sample_rows: Any) -> tuple[Any, Any]:
    """A dask input samples with ``"auto"`` by default; one too small to sample is loaded."""
    if A.ndim != 2 or 0 in A.shape:
        raise InvalidMatrixError(f"A must be a non-empty 2-D array; got shape {A.shape}")
    if sample_rows is None:
        sample_rows = "auto"
    m, n = (int(size) for size in A.shape)
    if _sample_size(sample_rows, max(m, n), min(m, n), check_rank(rank, (m, n))) is None:
        # Fewer than 2,000 rows on the long side: at most 4M entries, cheap to hold in memory.
        return check_binary_matrix(np.asarray(A.compute())), sample_rows
    return A, sample_rows


def _solve_qubo(
    core: np.ndarray,
    rank: int,
    model: Any,
    backend: Any,
    one_hot: str | None,
    weights: Mapping[str, float] | None,
    rng: np.random.Generator,
    backend_params: dict[str, Any],
    timings: dict[str, float],
    info: dict[str, Any],
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Compile the model on the core matrix and solve it; returns the best decoded factors."""
    from bmfdsl._solve import solve
    from bmfdsl.backends.registry import get_backend
    from bmfdsl.compile import compile_model

    stage = time.perf_counter()
    compiled = compile_model(model, core, rank, one_hot=one_hot)
    timings["compile"] = time.perf_counter() - stage

    name = DEFAULT_BACKEND if backend is None else backend
    sampler = get_backend(name) if isinstance(name, str) else name
    params = dict(backend_params)
    if "seed" in sampler.parameters and "seed" not in params:
        params["seed"] = _seed_from(rng)
    chosen: dict[str, Any]
    if weights is None:  # the paper's λ for whichever of its weights the model declares
        chosen = {k: v for k, v in DEFAULT_WEIGHTS.items() if k in compiled.weight_names}
    else:
        chosen = dict(weights)
        unknown = set(chosen) - set(compiled.weight_names)
        if unknown:
            raise UnknownNameError("weight", sorted(unknown)[0], compiled.weight_names)

    stage = time.perf_counter()
    decoded = solve(compiled, sampler, **chosen, **params)
    timings["solve"] = time.perf_counter() - stage
    best = decoded[0]
    info.update(
        model=compiled.model_name,
        backend=name if isinstance(name, str) else type(name).__name__,
        weights=decoded.info.get("weights"),
        energy=best.energy,
        backend_info=to_jsonable(decoded.info.get("backend_info", {})),
        structure_aware=decoded.info.get("weights") is None,
    )
    return best.U, best.V, dict(best.broken)

"""Exact BMF with OR-Tools CP-SAT: proven optima, or proven lower bounds, for small matrices.

The all-Boolean model (the one that worked best among CP-SAT, SCIP and HiGHS models tried):

* ``u_ik``, ``v_jk`` and ``w_ijk = u_ik ∧ v_jk``; ``x_ij = Σ_k w_ijk``;
* threshold literals ``t_ijs = [x_ij >= s]`` (``s = 1..r``, ordered, ``Σ_s t_ijs = x_ij``)
  weighted so that they sum to ``(a_ij - x_ij)²``: ``2s - 1`` for ``a = 0``, ``2s - 3`` for
  ``a = 1`` (plus the constant 1);
* identical rows (columns) of ``A`` share one row of ``U`` (``V``), weighted by their count
  (some optimum always does); all-zero lines get an all-zero factor row unless that side is
  one-hot;
* symmetry breaking: the columns of ``U`` in non-increasing lexicographic order (permuting
  the columns of U and V together changes nothing, one-hot rows included); the hint is put
  in that order too, so it stays a feasible hint;
* the heuristic answer as a solution hint.

Two searches (``search=``), both deterministic for a given seed: the budget is CP-SAT's
*deterministic* time (``max_deterministic_time``), a count of work, so machine load does not
change the answer.

* ``"core"`` (the default): CP-SAT's core-based lower-bounding search alone, one worker,
  no LP relaxation (``optimize_with_core``, ``linearization_level=0``). It raises the bound
  by finding unsatisfiable cores of the objective's literals: on Table 5 (MNIST, r=2) it
  proves many images optimal where the portfolio's bound stays at the spectral one
  (bench/results/certify.md). The known lower bound is *not* added as a constraint on the
  objective: such a constraint blinds the core search (measured: the bound then never rose
  above it), so it is applied to the answer instead.
* ``"portfolio"``: CP-SAT's default workers, interleaved (``interleave_search``), with the
  known bound as a constraint: better at finding solutions, it rarely proves anything beyond
  the cheap bounds here.

``seconds`` converts to deterministic units at the rate measured for the search on the
development machine (:data:`CPU_SECONDS_PER_DETERMINISTIC_UNIT`), so ``seconds`` is about the
CPU time used. A wall-clock guard of ``5 x seconds + 10`` only stops runaway runs (on a
machine so loaded that it fires, the answer can depend on load; ``info["status"]`` and the
times say).

>>> import numpy as np
>>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 1, 1]])
>>> exact = solve_exact(A, 2, seconds=5, seed=0)
>>> exact.error, exact.lower_bound, exact.optimal
(0, 0, True)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bmfdsl.errors import BackendUnavailableError, InvalidParameterError, SolverError
from bmfdsl.linalg import squared_error

#: CP-SAT workers of the ``"portfolio"`` search (interleaved, so results do not depend on the
#: machine).
DEFAULT_NUM_WORKERS = 4
#: The searches :func:`solve_exact` runs (see the module docstring).
SEARCHES = ("core", "portfolio")
#: The search ``certify=`` runs: the one that proves most (bench/results/certify.md).
DEFAULT_SEARCH = "core"
#: CPU seconds per unit of CP-SAT deterministic time, per search, measured on the development
#: machine (core: MNIST 28 x 28 models at rank 2 and 3, 0.3-0.5 CPU s per unit).
CPU_SECONDS_PER_DETERMINISTIC_UNIT = {"core": 0.5, "portfolio": 10.0}
#: Largest model built: ``u, v, w`` and threshold literals together.
MAX_MODEL_LITERALS = 2_000_000


def require_ortools() -> Any:
    """The ``ortools.sat.python.cp_model`` module, or a clear error naming the extra."""
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:
        raise BackendUnavailableError(
            "the exact engine needs OR-Tools CP-SAT, which is not installed; "
            "pip install 'bmfdsl[exact]'"
        ) from exc
    return cp_model


@dataclass(frozen=True)
class ExactResult:
    """What the exact engine proved.

    Attributes:
        U, V: the best solution it knows (the hint when it found nothing better), or ``None``
            when it was given no hint and found none.
        error: that solution's ``||A - UVᵀ||²`` (``None`` without a solution).
        lower_bound: the proven lower bound on the optimal error (an integer).
        optimal: the solution is proven optimal.
        info: status, wall time, deterministic time, model size, reduced shape.
    """

    U: np.ndarray | None
    V: np.ndarray | None
    error: int | None
    lower_bound: int
    optimal: bool
    info: dict[str, Any] = field(default_factory=dict)


def _groups(lines: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of ``lines``, each row's group index, and each group's count."""
    distinct, inverse, counts = np.unique(lines, axis=0, return_inverse=True, return_counts=True)
    return distinct, inverse.ravel(), counts


def _lex_sorted(U: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """U's columns (with V's) in non-increasing lexicographic order (row 0 most significant)."""
    order = sorted(range(U.shape[1]), key=lambda k: tuple(U[:, k].tolist()), reverse=True)
    return U[:, order], V[:, order]


def check_search(search: Any) -> str:
    """``search`` if it is one of :data:`SEARCHES`, else a clear error listing them."""
    if search not in SEARCHES:
        raise InvalidParameterError(
            f"search must be one of {', '.join(map(repr, SEARCHES))}; got {search!r}"
        )
    return str(search)


def configure_search(
    parameters: Any, search: str, *, seed: int, num_workers: int, deterministic_time: float
) -> None:
    """Set CP-SAT ``parameters`` for ``search`` (see the module docstring): seed, workers and
    the deterministic budget in CP-SAT's own units. ``num_workers`` applies to
    ``"portfolio"`` only; the core search runs on one worker."""
    parameters.random_seed = int(seed)
    parameters.max_deterministic_time = float(deterministic_time)
    if check_search(search) == "core":
        parameters.num_workers = 1
        parameters.optimize_with_core = True
        parameters.linearization_level = 0
    else:
        parameters.num_workers = int(num_workers)
        parameters.interleave_search = True


def check_seconds(seconds: Any, name: str = "certify") -> float:
    """``seconds`` as a positive finite float, or a clear error naming the parameter."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not seconds > 0
        or not math.isfinite(seconds)
    ):
        raise InvalidParameterError(
            f"{name} must be a positive, finite number of seconds; got {seconds!r}"
        )
    return float(seconds)


def solve_exact(
    A: Any,
    rank: int,
    *,
    seconds: float,
    hint: tuple[np.ndarray, np.ndarray] | None = None,
    one_hot: str | None = None,
    lower_bound: int = 0,
    seed: int = 0,
    num_workers: int = DEFAULT_NUM_WORKERS,
    search: str = DEFAULT_SEARCH,
) -> ExactResult:
    """Minimise ``||A - U Vᵀ||²_F`` over 0/1 ``U``, ``V`` with CP-SAT for ``seconds``.

    Args:
        A: ``m x n`` 0/1 numpy array.
        rank: ``r``.
        seconds: the work budget, about CPU seconds (deterministic; see the module docstring).
        hint: a known solution ``(U, V)`` (e.g. the heuristic's): CP-SAT starts from it,
            and it is returned when nothing better is found.
        one_hot: ``"U"`` or ``"V"``: every row of that factor has exactly one 1.
        lower_bound: a bound already known (e.g. the spectral one): a constraint of the
            ``"portfolio"`` search; the ``"core"`` search, whose own bound it would cap,
            applies it to the result afterwards.
        seed: CP-SAT's random seed.
        num_workers: CP-SAT workers of the ``"portfolio"`` search, interleaved
            (deterministic).
        search: ``"core"`` or ``"portfolio"`` (see the module docstring).

    Returns:
        An :class:`ExactResult`; ``lower_bound`` never falls below the one given.
    """
    cp_model = require_ortools()
    seconds = check_seconds(seconds)
    search = check_search(search)
    A = np.asarray(A, dtype=np.int8)
    reduced = _Reduced.of(A)
    mr, nr = reduced.R.shape
    literals = mr * rank + nr * rank + mr * nr * rank * (2 if rank > 1 else 1)
    info: dict[str, Any] = {"reduced_shape": [mr, nr], "literals": literals, "search": search}
    known = None if hint is None else _Known.of(A, hint)
    if literals > MAX_MODEL_LITERALS:
        info.update(status="skipped", reason=f"model too large ({literals} literals)")
        return _unsolved(known, lower_bound, info)
    # the core search is blind to a bound constrained on the objective: it is applied after
    constrained_bound = lower_bound if search == "portfolio" else 0
    bmf = _build_model(cp_model, reduced, rank, one_hot, constrained_bound)
    if known is not None:
        _add_known_hint(bmf, A, known, reduced, one_hot)
    solver, status = _solve_model(cp_model, bmf.model, seconds, seed, num_workers, search, info)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        proven = math.ceil(solver.BestObjectiveBound() - 1e-6)
        return _unsolved(known, max(lower_bound, int(proven)), info)
    return _read_answer(
        solver, status == cp_model.OPTIMAL, bmf, A, reduced, known, lower_bound, info
    )


@dataclass(frozen=True)
class _Reduced:
    """``A`` with identical rows and identical columns merged.

    Attributes:
        R: distinct rows x distinct columns (int64).
        row_group, col_group: each row's (column's) index among the distinct ones.
        row_count, col_count: how many rows (columns) each distinct one stands for.
    """

    R: np.ndarray
    row_group: np.ndarray
    row_count: np.ndarray
    col_group: np.ndarray
    col_count: np.ndarray

    @classmethod
    def of(cls, A: np.ndarray) -> _Reduced:
        row_lines, row_group, row_count = _groups(A)
        reduced_t, col_group, col_count = _groups(np.ascontiguousarray(row_lines.T))
        R = np.ascontiguousarray(reduced_t.T).astype(np.int64)
        return cls(R, row_group, row_count, col_group, col_count)


@dataclass(frozen=True)
class _Known:
    """A given solution (the hint) as int8 factors, and its error on ``A``."""

    U: np.ndarray
    V: np.ndarray
    error: int

    @classmethod
    def of(cls, A: np.ndarray, hint: tuple[np.ndarray, np.ndarray]) -> _Known:
        U = np.asarray(hint[0], dtype=np.int8)
        V = np.asarray(hint[1], dtype=np.int8)
        return cls(U, V, squared_error(A, U, V))


@dataclass
class _BMFModel:
    """The CP-SAT model of a reduced BMF and its literals: ``u[i][k]``, ``v[j][k]``, the
    products ``w[i, j, k] = u_ik ∧ v_jk`` and the thresholds ``t[i, j, s] = [x_ij >= s + 1]``
    (none at rank 1, where ``x_ij = w_ij0``)."""

    model: Any
    u: list[list[Any]]
    v: list[list[Any]]
    products: dict[tuple[int, int, int], Any] = field(default_factory=dict)
    thresholds: dict[tuple[int, int, int], Any] = field(default_factory=dict)


def _build_model(
    cp_model: Any, reduced: _Reduced, rank: int, one_hot: str | None, lower_bound: int
) -> _BMFModel:
    """The all-Boolean model of the module docstring, minimising the error (at least
    ``lower_bound``). The order of variables and constraints is fixed: it is CP-SAT's input,
    so it decides the answer for a seed."""
    mr, nr = reduced.R.shape
    model = cp_model.CpModel()
    u = [[model.NewBoolVar(f"u{i}_{k}") for k in range(rank)] for i in range(mr)]
    v = [[model.NewBoolVar(f"v{j}_{k}") for k in range(rank)] for j in range(nr)]
    bmf = _BMFModel(model, u, v)
    _constrain_factor_rows(model, u, np.logical_not(reduced.R.any(axis=1)), one_hot == "U")
    _constrain_factor_rows(model, v, np.logical_not(reduced.R.any(axis=0)), one_hot == "V")
    constant, objective = _add_error_terms(bmf, reduced, rank)
    _order_columns_of_u(model, u, rank)
    error_expr = constant + sum(coefficient * level for level, coefficient in objective)
    if lower_bound > 0:
        model.Add(error_expr >= int(lower_bound))
    model.Minimize(error_expr)
    return bmf


def _constrain_factor_rows(
    model: Any, rows: list[list[Any]], zero_lines: np.ndarray, one_hot: bool
) -> None:
    """Each factor row has exactly one 1 (one-hot side), else is all zero for a zero line."""
    for row, zero in zip(rows, zero_lines.tolist(), strict=True):
        if one_hot:
            model.AddExactlyOne(row)
        elif zero:
            for literal in row:
                model.Add(literal == 0)


def _add_error_terms(
    bmf: _BMFModel, reduced: _Reduced, rank: int
) -> tuple[int, list[tuple[Any, int]]]:
    """Products and thresholds for every reduced entry; the error as a constant plus
    ``(literal, coefficient)`` terms, each entry weighted by the lines it stands for."""
    model, u, v = bmf.model, bmf.u, bmf.v
    mr, nr = reduced.R.shape
    objective: list[tuple[Any, int]] = []
    constant = 0
    for i in range(mr):
        for j in range(nr):
            weight = int(reduced.row_count[i] * reduced.col_count[j])
            a = int(reduced.R[i, j])
            terms = []
            for k in range(rank):
                w = model.NewBoolVar(f"w{i}_{j}_{k}")
                model.AddImplication(w, u[i][k])
                model.AddImplication(w, v[j][k])
                model.AddBoolOr([w, u[i][k].Not(), v[j][k].Not()])
                bmf.products[i, j, k] = w
                terms.append(w)
            if rank == 1:
                levels = terms  # x = w itself
            else:
                levels = [model.NewBoolVar(f"t{i}_{j}_{s}") for s in range(1, rank + 1)]
                for s in range(rank - 1):
                    model.AddImplication(levels[s + 1], levels[s])
                model.Add(sum(levels) == sum(terms))
                for s, level in enumerate(levels):
                    bmf.thresholds[i, j, s] = level
            constant += weight * a
            for s, level in enumerate(levels, start=1):
                objective.append((level, weight * (2 * s - 1 - 2 * a)))
    return constant, objective


def _order_columns_of_u(model: Any, u: list[list[Any]], rank: int) -> None:
    """Symmetry breaking: U's columns in non-increasing lexicographic order, row 0 most
    significant. While the prefix is equal (literal ``prefix``), ``d_i <= c_i``; a row where
    ``c_i == d_i`` keeps it equal."""
    mr = len(u)
    for k in range(rank - 1):
        prefix: Any = None  # None: the empty prefix, always equal
        for i in range(mr):
            c, d = u[i][k], u[i][k + 1]
            guard = [] if prefix is None else [prefix.Not()]
            model.AddBoolOr([*guard, d.Not(), c])
            if i == mr - 1:
                break
            following = model.NewBoolVar(f"lex{k}_{i}")
            model.AddBoolOr([*guard, c, following])  # c = d = 0: still equal
            model.AddBoolOr([*guard, d.Not(), following])  # c = d = 1: still equal
            prefix = following


def _add_known_hint(
    bmf: _BMFModel, A: np.ndarray, known: _Known, reduced: _Reduced, one_hot: str | None
) -> None:
    """The known solution, reduced and in lexicographic column order, as a hint for every
    literal (so it stays a feasible hint)."""
    reduced_hint = _reduce_hint(A, known.U, known.V, reduced.row_group, reduced.col_group, one_hot)
    if reduced_hint is None:
        return
    hu, hv = _lex_sorted(*reduced_hint)
    model = bmf.model
    for literals, values in ((bmf.u, hu), (bmf.v, hv)):
        for row, row_values in zip(literals, values.tolist(), strict=True):
            for literal, value in zip(row, row_values, strict=True):
                model.AddHint(literal, int(value))
    x = hu.astype(np.int64) @ hv.T.astype(np.int64)
    for (i, j, k), w in bmf.products.items():
        model.AddHint(w, int(hu[i, k] * hv[j, k]))
    for (i, j, s), level in bmf.thresholds.items():
        model.AddHint(level, int(x[i, j] >= s + 1))


def _solve_model(
    cp_model: Any,
    model: Any,
    seconds: float,
    seed: int,
    num_workers: int,
    search: str,
    info: dict[str, Any],
) -> tuple[Any, Any]:
    """CP-SAT on ``model`` within the deterministic budget of ``seconds``: the solver and
    its status; ``info`` gets the status, times, seed and workers."""
    solver = cp_model.CpSolver()
    parameters = solver.parameters
    configure_search(
        parameters,
        search,
        seed=seed,
        num_workers=num_workers,
        deterministic_time=seconds / CPU_SECONDS_PER_DETERMINISTIC_UNIT[search],
    )
    parameters.max_time_in_seconds = 5 * seconds + 10  # a guard only (see the docstring)
    started = time.perf_counter()
    cpu_started = time.process_time()
    status = solver.Solve(model)
    info.update(
        status=solver.StatusName(status),
        wall_time=time.perf_counter() - started,
        cpu_time=time.process_time() - cpu_started,
        # the response's field: CpSolver.deterministic_time is missing in ortools 9.12
        deterministic_time=solver.response_proto.deterministic_time,
        seed=int(seed),
        num_workers=int(parameters.num_workers),
    )
    if status in (cp_model.INFEASIBLE, cp_model.MODEL_INVALID):  # never for a valid model
        raise SolverError(f"CP-SAT found the BMF model {solver.StatusName(status)}; a bug")
    return solver, status


def _read_answer(
    solver: Any,
    proven_optimal: bool,
    bmf: _BMFModel,
    A: np.ndarray,
    reduced: _Reduced,
    known: _Known | None,
    lower_bound: int,
    info: dict[str, Any],
) -> ExactResult:
    """The solution CP-SAT found, expanded to ``A``'s shape and checked against its
    objective; the known solution instead when it is no worse; the bound it proved."""
    bound = max(int(lower_bound), math.ceil(solver.BestObjectiveBound() - 1e-6))
    value = round(solver.ObjectiveValue())
    found_U = np.array([[solver.Value(literal) for literal in row] for row in bmf.u], np.int8)
    found_V = np.array([[solver.Value(literal) for literal in row] for row in bmf.v], np.int8)
    U_full, V_full = found_U[reduced.row_group], found_V[reduced.col_group]
    error = squared_error(A, U_full, V_full)
    if error != value:  # the model and the matrix disagree: a bug, never a silent answer
        raise SolverError(f"CP-SAT objective {value} != recomputed error {error}; a bug")
    if known is not None and known.error <= error:
        U_full, V_full, error = known.U, known.V, known.error
    bound = min(bound, error)
    optimal = proven_optimal or bound >= error
    return ExactResult(U_full, V_full, int(error), int(error if optimal else bound), optimal, info)


def _unsolved(known: _Known | None, lower_bound: int, info: dict[str, Any]) -> ExactResult:
    """No solution from CP-SAT: the known one (if any) with the bound proved."""
    if known is None:
        return ExactResult(None, None, None, int(lower_bound), False, info)
    bound = min(int(lower_bound), known.error)
    return ExactResult(known.U, known.V, known.error, bound, bound >= known.error, info)


def _reduce_hint(
    A: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
    row_group: np.ndarray,
    col_group: np.ndarray,
    one_hot: str | None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The hint on the reduced matrix: V from each column group's first column, then the best
    U for that V (identical rows get identical rows of U), zero lines off unless one-hot."""
    from bmfdsl.solvers._bls import solve_bls

    groups = int(col_group.max()) + 1
    first = np.full(groups, -1, dtype=np.int64)
    for j in range(col_group.size - 1, -1, -1):
        first[col_group[j]] = j
    V_reduced = V[first].astype(np.int8)
    if one_hot != "V":
        zero = ~A[:, first].any(axis=0)
        V_reduced[zero] = 0
    U_best = solve_bls(A, V_reduced[col_group], one_hot=one_hot == "U")
    rows = int(row_group.max()) + 1
    first_row = np.full(rows, -1, dtype=np.int64)
    for i in range(row_group.size - 1, -1, -1):
        first_row[row_group[i]] = i
    U_reduced = np.asarray(U_best, dtype=np.int8)[first_row]
    return U_reduced, V_reduced

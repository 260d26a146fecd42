"""``cpsat``: OR-Tools CP-SAT on any small BQM: a proven optimum, or a proven lower bound.

Each product ``x_u x_v`` becomes a Boolean ``y = x_u ∧ x_v``; the energy is minimised exactly
when the biases are integers, or dyadic fractions (scaled by a power of two); other biases are
scaled to about 9 significant digits and rounded, so the proof is then up to that rounding
(``info["exact"]`` says which). Returned energies are always the BQM's own.

>>> import dimod
>>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -1.0}, {("x", "y"): -3.0}, 0, "BINARY")
>>> sampleset = CpSatBackend().sample(bqm, seed=0)
>>> float(sampleset.first.energy), sampleset.info["optimal"]
(-3.0, True)
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import dimod
import numpy as np

from bmfdsl.backends._common import BackendSampler, Initialized, check_seed, check_time_limit
from bmfdsl.errors import InvalidParameterError, SolverError
from bmfdsl.solvers import (
    DEFAULT_NUM_WORKERS,
    check_search,
    check_seconds,
    configure_search,
    require_ortools,
)

__all__ = ["CpSatBackend"]

#: Default CP-SAT deterministic time per call (about 10 CPU seconds; see bmfdsl.solvers._cpsat).
DEFAULT_DETERMINISTIC_TIME = 1.0
_MAX_DYADIC_SHIFT = 30
_SIGNIFICANT = 1e9


def _integer_scale(values: np.ndarray) -> tuple[float, bool]:
    """A factor making every value an integer (exact), else one for ~9 significant digits."""
    for shift in range(_MAX_DYADIC_SHIFT + 1):
        scaled = values * float(2**shift)
        if np.all(scaled == np.round(scaled)) and np.abs(scaled).max(initial=0) < 2**53:
            return float(2**shift), True
    largest = float(np.abs(values).max(initial=0))
    return _SIGNIFICANT / largest, False


class CpSatBackend(BackendSampler, Initialized):
    """Exact minimisation of a BQM with CP-SAT (deterministic for a seed by default).

    One sample comes back: the best found. ``info`` holds ``optimal`` (proven),
    ``lower_bound`` (proven, in energy units), ``status``, ``exact`` and the solver times.
    """

    name: ClassVar[str] = "cpsat"
    descriptions: ClassVar[dict[str, str]] = {
        "deterministic_time": "CP-SAT deterministic time limit in its own work units (one "
        "took about 10 CPU seconds on the development machine); the same seed gives the same "
        "answer",
        "time_limit": "wall-clock limit in seconds (opt-in; the answer then depends on load)",
        "seed": "CP-SAT random seed in [0, 2**31)",
        "num_workers": "CP-SAT workers of the 'portfolio' search, interleaved deterministically",
        "search": "'portfolio' (CP-SAT's standard worker portfolio, interleaved) or 'core' "
        "(its core-based lower-bounding search alone, one worker: often proves bounds the "
        "portfolio does not)",
        "initial_states": "a warm start: its first state is CP-SAT's solution hint",
    }

    def _sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        deterministic_time: float = DEFAULT_DETERMINISTIC_TIME,
        time_limit: float | None = None,
        seed: int = 0,
        num_workers: int = DEFAULT_NUM_WORKERS,
        search: str = "portfolio",
        initial_states: Any = None,
    ) -> dimod.SampleSet:
        cp_model = require_ortools()
        deterministic_time = check_seconds(deterministic_time, "deterministic_time")
        seed = check_seed(seed) or 0
        search = check_search(search)
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise InvalidParameterError(
                f"num_workers must be a positive integer; got {num_workers!r}"
            )
        binary = bqm.change_vartype(dimod.BINARY, inplace=False)
        labels = list(binary.variables)
        model, x, scale, exact = _cp_model(cp_model, binary, labels)
        if initial_states is not None:
            _add_hint(model, x, bqm, self.given_states(bqm, initial_states))
        solver, status = _solve(
            cp_model, model, search, seed, num_workers, deterministic_time, time_limit
        )
        chosen = np.array([[solver.Value(literal) for literal in x]], dtype=np.int8)
        if bqm.vartype is dimod.SPIN:
            chosen = 2 * chosen - 1
        bound = solver.BestObjectiveBound() / scale + float(binary.offset)
        info = {
            "status": solver.StatusName(status),
            "optimal": status == cp_model.OPTIMAL,
            "lower_bound": math.floor(bound * 1e9) / 1e9 if exact else bound,
            "exact": exact,
            "solver_wall_time": solver.wall_time,
            # the response's field: CpSolver.deterministic_time is missing in ortools 9.12
            "deterministic_time": solver.response_proto.deterministic_time,
            "seed": seed,
            "search": search,
            "num_workers": int(solver.parameters.num_workers),
        }
        sampleset = dimod.SampleSet.from_samples_bqm((chosen, labels), bqm)
        sampleset.info.update(info)
        return sampleset


def _cp_model(
    cp_model: Any, binary: dimod.BinaryQuadraticModel, labels: list[Any]
) -> tuple[Any, list[Any], float, bool]:
    """The CP-SAT model of the BINARY ``binary``: its variables in ``labels`` order, the scale
    of its integer objective and whether that scaling is exact."""
    index = {label: i for i, label in enumerate(labels)}
    linear = np.array([binary.get_linear(v) for v in labels], dtype=np.float64)
    quadratic = [(index[u], index[v], float(bias)) for u, v, bias in binary.iter_quadratic()]
    values = np.concatenate([linear, [bias for _, _, bias in quadratic]])
    scale, exact = _integer_scale(values)

    model = cp_model.CpModel()
    x = [model.NewBoolVar(f"x{i}") for i in range(len(labels))]
    terms = [(x[i], round(linear[i] * scale)) for i in range(len(labels)) if linear[i]]
    for u, v, bias in quadratic:
        if not bias:
            continue
        y = model.NewBoolVar(f"y{u}_{v}")
        model.AddImplication(y, x[u])
        model.AddImplication(y, x[v])
        model.AddBoolOr([y, x[u].Not(), x[v].Not()])
        terms.append((y, round(bias * scale)))
    model.Minimize(sum(coefficient * literal for literal, coefficient in terms))
    return model, x, scale, exact


def _solve(
    cp_model: Any,
    model: Any,
    search: str,
    seed: int,
    num_workers: int,
    deterministic_time: float,
    time_limit: float | None,
) -> tuple[Any, Any]:
    """CP-SAT on ``model`` within its limits: the solver and its status, which has a
    solution (else a :class:`SolverError` saying which limit to raise)."""
    solver = cp_model.CpSolver()
    configure_search(
        solver.parameters,
        search,
        seed=seed,
        num_workers=num_workers,
        deterministic_time=deterministic_time,
    )
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = check_time_limit(time_limit)
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise SolverError(
            f"CP-SAT found no solution ({solver.StatusName(status)}) within its limit; "
            "raise deterministic_time or time_limit"
        )
    return solver, status


def _add_hint(
    model: Any, x: list[Any], bqm: dimod.BinaryQuadraticModel, states: np.ndarray
) -> None:
    """The first of ``states`` (in ``bqm``'s variable order and vartype) as a solution hint."""
    if not len(states):
        return
    binary = states[0] if bqm.vartype is dimod.BINARY else (states[0] + 1) // 2
    for literal, value in zip(x, binary.tolist(), strict=True):
        model.AddHint(literal, int(value))

"""``native``: bmfdsl's structure-aware BMF solver (numba).

A :class:`~bmfdsl.modeling.StructuredSampler`: it takes the verified
:class:`~bmfdsl.modeling.BMFStructure` of a compiled model (``compiled.structure``), never a
BQM. Plain BMF is solved by the time-budgeted portfolio of
:func:`bmfdsl.solvers.native.solve_bmf` (heat-bath row annealing, parallel tempering,
restarts, ALS polish, optimality certificates); masked or weighted BMF (missing data) by
restarted exact weighted alternating least squares (:mod:`bmfdsl.solvers.native._weighted`); the
rest of the family (Boolean OR and XOR products, L1 terms, at-most/at-least-k rows) by exact row
updates and an iterated local search (:func:`bmfdsl.solvers.native.solve_family`). Models
without a verified structure go to a generic backend (``da``, ``neal``, ...).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

import dimod
import numpy as np

from bmfdsl.backends._common import (
    check_num_reads,
    check_seed,
    check_time_limit,
    keyword_defaults,
)
from bmfdsl.errors import InvalidParameterError
from bmfdsl.modeling import BMFStructure, StructuredSampler
from bmfdsl.solvers.native import (
    DEFAULT_FAMILY_WORK,
    WORK_PER_SECOND,
    FamilyProblem,
    NativeSettings,
    solve_bmf,
    solve_family,
    solve_weighted_bmf,
)
from bmfdsl.validation import check_count, check_real

__all__ = ["NativeSampler"]

#: Seconds per U/V label to build and decode the answer's SampleSet (dimod's label index):
#: measured 0.43 s for the 220,000 labels of a 20,000 x 2,000 rank-10 model.
_ANSWER_SECONDS_PER_LABEL = 2e-6

#: Annealing restarts of a masked or weighted model when ``num_reads`` is not given.
_WEIGHTED_READS = 32
_DEFAULTS = NativeSettings()  # quoted by the descriptions: one source for each default


def _default(name: str) -> str:
    return f"(default {getattr(_DEFAULTS, name)!r})"


_DESCRIPTIONS = {
    "work_limit": "work units for the solve, counted, not timed (default: auto_work_limit of "
    "the matrix's shape, about 1 s of work on small inputs and more on big ones; "
    f"{WORK_PER_SECOND:g} units ~ 1 s on an idle 2-core machine); a Boolean, XOR, L1 or "
    "row-limited model counts the multiply-adds of its row updates (default "
    f"{DEFAULT_FAMILY_WORK:g}, a few seconds)",
    "time_limit": "opt-in wall-clock limit in seconds (restarts and polishes check the "
    "clock inside); the answer then depends on machine load: not reproducible",
    "num_reads": "maximum annealing restarts, >= 0 (0: the certificate and the seeds only; "
    f"default: as many as the budget allows; masked/weighted: >= 1, {_WEIGHTED_READS} restarts)",
    "seed": "seed in [0, 2**31); the same seed gives the same result unless time_limit is set",
    "initial_factors": "warm starts: a list of (U, V) pairs",
    "sweeps": f"maximum sweeps per annealing run {_default('sweeps')}",
    "replicas": f"chains per run {_default('replicas')}",
    "t_hot": f"hottest temperature, squared error per row {_default('t_hot')}",
    "t_cold": f"coldest temperature {_default('t_cold')}",
    "core_rows": f"tall matrices are annealed on a sample of this many rows "
    f"{_default('core_rows')}",
    "max_solves": f"cap on exact BLS solves per ALS polish {_default('max_solves')}",
    "max_enumeration": f"cost cap of the exact rank-1 certificate {_default('max_enumeration')}",
    "num_solutions": f"distinct solutions returned, best first {_default('num_solutions')}",
    "patience": "stop after this many restarts without improvement, and at least as many "
    f"as it took to find the best; math.inf: never stop early {_default('patience')}",
    "work_patience": "start no restart that would take the work since the last improvement "
    "past this many units and past what it took to find the best (default: no such stop; "
    "the default factorize sets it for its core solve)",
    "flip_sweeps": "sweeps of the final flip descent of the short side's factor, the other "
    "re-solved exactly, in work beside the budget (0: none; the default factorize polishes "
    f"its full-data answer so instead) {_default('flip_sweeps')}",
}


class NativeSampler(StructuredSampler):
    """Structure-aware BMF solver: ``sample_bmf(structure, ...)`` returns a SampleSet.

    >>> import numpy as np
    >>> structure = BMFStructure(np.kron(np.eye(2, dtype=np.int8), np.ones((2, 2), np.int8)), 2)
    >>> sampleset = NativeSampler().sample_bmf(structure, seed=0)
    >>> float(sampleset.first.energy), sampleset.info["certificate"]["reason"]
    (0.0, 'zero error')
    """

    name: ClassVar[str] = "native"

    @property
    def parameters(self) -> dict[str, list[str]]:
        """The keywords of :meth:`sample_bmf` (derived from its signature)."""
        return {name: [] for name in keyword_defaults(self.sample_bmf)}

    @property
    def properties(self) -> dict[str, Any]:
        """Name and what each parameter means."""
        return {"name": self.name, "parameter_descriptions": dict(_DESCRIPTIONS)}

    def __repr__(self) -> str:
        return "NativeSampler()"

    def sample_bmf(
        self,
        structure: BMFStructure,
        *,
        time_limit: float | None = None,
        work_limit: float | None = None,
        num_reads: int | None = None,
        seed: int | None = None,
        initial_factors: Any = (),
        sweeps: int | None = None,
        replicas: int | None = None,
        t_hot: float | None = None,
        t_cold: float | None = None,
        core_rows: int | None = None,
        max_solves: int | None = None,
        max_enumeration: int | None = None,
        num_solutions: int | None = None,
        patience: int | None = None,
        work_patience: float | None = None,
        flip_sweeps: int | None = None,
    ) -> dimod.SampleSet:
        """Solve the BMF of ``structure``; solutions best first, energy = objective.

        Every returned solution is feasible (one-hot rows when ``structure.one_hot`` is set).
        ``info["certificate"]`` says when the best plain-BMF solution is provably optimal.
        """
        if not isinstance(structure, BMFStructure):
            raise InvalidParameterError(
                f"sample_bmf needs a BMFStructure (compiled.structure); got "
                f"{type(structure).__name__}"
            )
        seed = check_seed(seed)
        # checked as every backend checks them, before the time left for the answer is taken
        # off (a clamp first would turn -1 or NaN into a valid 0)
        # plain BMF takes 0 (its seeds only: the pipeline's sampled core); the others need 1
        num_reads = None if num_reads is None else check_count(num_reads, "num_reads", minimum=0)
        time_limit = None if time_limit is None else check_time_limit(time_limit)
        plain_only = {
            "time_limit": time_limit,
            "work_limit": work_limit,
            "sweeps": sweeps,
            "replicas": replicas,
            "t_hot": t_hot,
            "t_cold": t_cold,
            "core_rows": core_rows,
            "max_solves": max_solves,
            "max_enumeration": max_enumeration,
            "patience": patience,
            "work_patience": work_patience,
            "flip_sweeps": flip_sweeps,
        }
        weights = structure.effective_weights
        if not structure.is_integer_bmf:
            _refuse_family_only({**plain_only, "num_reads": num_reads})
            if work_limit is not None:
                work_limit = check_real(work_limit, "work_limit", strict=True)
            answer = _solve_family(structure, work_limit, time_limit, seed, initial_factors)
        elif weights is not None:
            _refuse_plain_only(plain_only)
            reads = None if num_reads is None else check_num_reads(num_reads)
            answer = _solve_weighted(
                structure, weights, reads, seed, initial_factors, num_solutions
            )
        else:
            settings = _plain_settings(structure, plain_only, num_reads, num_solutions)
            answer = _solve_plain(structure, settings, seed, initial_factors, time_limit)
        solutions, errors, info = answer
        info["backend"] = self.name
        return structure.sampleset(solutions, errors, **info)


#: Solutions best first as ``(U, V)``, their errors and the solver's info.
_Answer = tuple[list[tuple[np.ndarray, np.ndarray]], list[float], dict[str, Any]]


def _refuse_plain_only(plain_only: dict[str, Any]) -> None:
    """A masked or weighted model takes none of the portfolio's keywords."""
    given = sorted(k for k, v in plain_only.items() if v is not None)
    if given:
        raise InvalidParameterError(
            f"{given} apply to plain BMF only; a masked or weighted model takes num_reads, "
            "seed, initial_factors and num_solutions"
        )


def _refuse_family_only(plain_only: dict[str, Any]) -> None:
    """A Boolean, XOR, L1 or row-limited model takes work_limit, time_limit and no annealing
    keywords (num_reads included: its search is one iterated local search)."""
    family = ("work_limit", "time_limit")
    given = sorted(k for k, v in plain_only.items() if v is not None and k not in family)
    if given:
        raise InvalidParameterError(
            f"{given} apply to integer BMF only; a Boolean, XOR, L1 or row-limited model "
            "takes work_limit, time_limit, seed and initial_factors"
        )


def _solve_family(
    structure: BMFStructure,
    work_limit: float | None,
    time_limit: float | None,
    seed: int | None,
    initial_factors: Any,
) -> _Answer:
    """The family by exact row updates (the structure's L1 weights already resolved)."""
    result = solve_family(
        FamilyProblem.of(structure),
        seed=seed,
        work_limit=work_limit,
        initial_factors=initial_factors,
        time_limit=time_limit,
    )
    return [(result.U, result.V)], [result.objective], dict(result.info)


def _plain_settings(
    structure: BMFStructure,
    plain_only: dict[str, Any],
    num_reads: int | None,
    num_solutions: int | None,
) -> NativeSettings:
    """The portfolio's settings from the keywords given (None: the settings' default); a time
    limit leaves room for building the answer's SampleSet."""
    options: dict[str, Any] = {**plain_only, "num_solutions": num_solutions}
    chosen = {key: value for key, value in options.items() if value is not None}
    if options["patience"] == math.inf:  # no early stop: the settings spell that None
        chosen["patience"] = None
    settings = NativeSettings(num_reads=num_reads, **chosen)  # every value checked here
    if settings.time_limit is None:
        return settings
    building = _ANSWER_SECONDS_PER_LABEL * len(structure.labels())
    return replace(settings, time_limit=max(0.0, settings.time_limit - building))


def _solve_plain(
    structure: BMFStructure,
    settings: NativeSettings,
    seed: int | None,
    initial_factors: Any,
    requested_time_limit: float | None,
) -> _Answer:
    """Plain BMF by the portfolio; ``info`` quotes the time limit as the caller gave it."""
    result = solve_bmf(
        structure.A,
        structure.rank,
        one_hot=structure.one_hot,
        initial_factors=initial_factors,
        seed=seed,
        settings=settings,
    )
    solutions, errors, info = _answer(result.solutions, result.info)
    if requested_time_limit is not None:
        info["time_limit"] = requested_time_limit
    return solutions, errors, info


def _solve_weighted(
    structure: BMFStructure,
    weights: np.ndarray,
    num_reads: int | None,
    seed: int | None,
    initial_factors: Any,
    num_solutions: int | None,
) -> _Answer:
    """Masked or weighted BMF (``weights``, the structure's own) by restarted weighted ALS."""
    result = solve_weighted_bmf(
        structure.A,
        weights,
        structure.rank,
        one_hot=structure.one_hot,
        num_reads=_WEIGHTED_READS if num_reads is None else int(num_reads),
        seed=seed,
        initial_factors=initial_factors,
        num_solutions=1 if num_solutions is None else check_count(num_solutions, "num_solutions"),
    )
    return _answer(result.solutions, result.info)


def _answer(found: Sequence[tuple[np.ndarray, np.ndarray, float]], info: dict[str, Any]) -> _Answer:
    """``(U, V, error)`` triples as the SampleSet takes them, and a copy of ``info``."""
    return [(U, V) for U, V, _ in found], [float(error) for _, _, error in found], dict(info)

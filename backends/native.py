"""``native``: bmfdsl's structure-aware BMF solver (numba).

A :class:`~bmfdsl.modeling.StructuredSampler`: it takes the verified
:class:`~bmfdsl.modeling.BMFStructure` of a compiled model (``compiled.structure``), never a
BQM. Plain BMF is solved by the time-budgeted portfolio of
:func:`bmfdsl.solvers.native._portfolio.solve_bmf` (heat-bath row annealing, parallel tempering,
restarts, ALS polish, optimality certificates); masked or weighted BMF (missing data) by
restarted exact weighted alternating least squares (:mod:`bmfdsl.solvers.native._weighted`). Models
without a verified structure go to a generic backend (``da``, ``neal``, ...).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import dimod
import numpy as np

from bmfdsl.backends._common import check_seed, keyword_defaults
from bmfdsl.errors import InvalidParameterError
from bmfdsl.modeling import BMFStructure, StructuredSampler
from bmfdsl.solvers.native import WORK_PER_SECOND, NativeSettings, solve_bmf, solve_weighted_bmf

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
    f"{WORK_PER_SECOND:g} units ~ 1 s on an idle 2-core machine)",
    "time_limit": "opt-in wall-clock limit in seconds (restarts and polishes check the "
    "clock inside); the answer then depends on machine load: not reproducible",
    "num_reads": "maximum annealing restarts (default: as many as the budget allows; "
    f"masked/weighted: {_WEIGHTED_READS} restarts)",
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
        if num_reads is not None and (
            isinstance(num_reads, bool)
            or not isinstance(num_reads, int | np.integer)
            or num_reads < 0
        ):
            raise InvalidParameterError(f"num_reads must be an integer >= 0; got {num_reads!r}")
        weights = structure.effective_weights
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
        }
        if weights is not None and any(v is not None for v in plain_only.values()):
            given = sorted(k for k, v in plain_only.items() if v is not None)
            raise InvalidParameterError(
                f"{given} apply to plain BMF only; a masked or weighted model takes num_reads, "
                "seed, initial_factors and num_solutions"
            )
        if weights is not None:
            result = solve_weighted_bmf(
                structure.A,
                weights,
                structure.rank,
                one_hot=structure.one_hot,
                num_reads=_WEIGHTED_READS if num_reads is None else int(num_reads),
                seed=seed,
                initial_factors=initial_factors,
                num_solutions=1 if num_solutions is None else int(num_solutions),
            )
            solutions = [(U, V) for U, V, _ in result.solutions]
            errors = [float(error) for _, _, error in result.solutions]
            info = dict(result.info)
        else:
            requested = time_limit
            if time_limit is not None:  # the limit covers building the answer's SampleSet too
                time_limit = max(
                    0.0, time_limit - _ANSWER_SECONDS_PER_LABEL * len(structure.labels())
                )
                plain_only["time_limit"] = time_limit
            options: dict[str, Any] = {**plain_only, "num_solutions": num_solutions}
            chosen = {key: value for key, value in options.items() if value is not None}
            if patience == math.inf:  # no early stop: the settings spell that None
                chosen["patience"] = None
            settings = NativeSettings(
                num_reads=None if num_reads is None else int(num_reads), **chosen
            )
            plain = solve_bmf(
                structure.A,
                structure.rank,
                one_hot=structure.one_hot,
                initial_factors=initial_factors,
                seed=seed,
                settings=settings,
            )
            solutions = [(U, V) for U, V, _ in plain.solutions]
            errors = [float(error) for _, _, error in plain.solutions]
            info = dict(plain.info)
            if requested is not None:
                info["time_limit"] = requested
        info["backend"] = self.name
        return structure.sampleset(solutions, errors, **info)

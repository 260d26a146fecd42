"""``native``: bmfdsl's structure-aware BMF solver (numba), with the DA algorithm as fallback.

Given a plain BMF model (``compiled.structure`` is a :class:`~bmfdsl.structure.BMFStructure`),
:meth:`NativeSampler.sample_structure` solves ``min ||A - U Vᵀ||²_F`` directly over the feasible
set with the work-budgeted portfolio of :func:`bmfdsl.native.portfolio.solve_bmf` (heat-bath
row annealing, parallel tempering, restarts, ALS polish, optimality certificates). Any other
BQM goes through :meth:`NativeSampler.sample`, which warns and runs the ``da`` sampler.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import dimod

from bmfdsl.backends._common import BackendSampler, check_parameter_names, check_seed
from bmfdsl.backends.da import DASampler
from bmfdsl.errors import InvalidParameterError
from bmfdsl.native.portfolio import NativeSettings, solve_bmf
from bmfdsl.result import DecodedSample
from bmfdsl.structure import BMFStructure

__all__ = ["NativeFallbackWarning", "NativeSampler"]

_SETTING_NAMES = (
    "time_limit",
    "work_limit",
    "sweeps",
    "replicas",
    "t_hot",
    "t_cold",
    "core_rows",
    "max_solves",
    "max_enumeration",
    "num_solutions",
    "patience",
)


class NativeFallbackWarning(UserWarning):
    """``native`` was given a BQM without BMF structure and ran the ``da`` algorithm on it."""


class NativeSampler(BackendSampler):
    """Structure-aware BMF solver; plain BQMs fall back to the DA algorithm (with a warning).

    >>> import numpy as np
    >>> structure = BMFStructure(np.kron(np.eye(2, dtype=np.int8), np.ones((2, 2), np.int8)), 2)
    >>> decoded, info = NativeSampler().sample_structure(structure, seed=0)
    >>> decoded[0].error, info["certificate"]["reason"]
    (0, 'zero error')
    """

    name: ClassVar[str] = "native"
    accepted_parameters: ClassVar[dict[str, str]] = dict(DASampler.accepted_parameters)
    structure_parameters: ClassVar[dict[str, str]] = {
        "work_limit": "work units for the solve, counted, not timed (default: about 1 s of "
        "work up to 300,000 cells, then linear, at most 4.8 s; 3e9 units ~ 1 s on an idle "
        "2-core machine)",
        "time_limit": "opt-in wall-clock limit in seconds (restarts and polishes check the "
        "clock inside); the answer then depends on machine load: not reproducible",
        "num_reads": "maximum annealing restarts (default: as many as the budget allows)",
        "seed": "seed in [0, 2**31); the same seed gives the same result unless time_limit is set",
        "initial_factors": "warm starts: a list of (U, V) pairs",
        "sweeps": "maximum sweeps per annealing run (default 500)",
        "replicas": "chains per run (default 4)",
        "t_hot": "hottest temperature, squared error per row (default 3.0)",
        "t_cold": "coldest temperature (default 0.05)",
        "core_rows": "tall matrices are annealed on a sample of this many rows (default 120)",
        "max_solves": "cap on exact BLS solves per ALS polish (default 100)",
        "max_enumeration": "cost cap of the exact rank-1 certificate (default 2**29)",
        "num_solutions": "distinct solutions returned, best first (default 1)",
        "patience": "stop after this many restarts without improvement, and at least as many "
        "as it took to find the best (default 24; None: use the whole budget)",
    }

    @property
    def properties(self) -> dict[str, Any]:
        """Name, parameter descriptions of ``sample`` and of ``sample_structure``."""
        return {
            **super().properties,
            "structure_parameters": dict(self.structure_parameters),
            "fallback": "da",
        }

    def sample_structure(
        self, structure: BMFStructure, **params: Any
    ) -> tuple[list[DecodedSample], dict[str, Any]]:
        """Solve the BMF of ``structure`` directly; solutions best first and an info dict.

        Every returned solution is feasible (one-hot rows when ``structure.one_hot`` is set)
        and its ``energy`` equals its ``error``. ``info["certificate"]`` says when the best
        solution is provably optimal.
        """
        check_parameter_names(self.name, params, self.structure_parameters)
        params = {key: value for key, value in params.items() if value is not None}
        seed = check_seed(params.pop("seed", None))
        initial_factors = params.pop("initial_factors", ())
        num_reads = params.pop("num_reads", None)
        if num_reads is not None and (isinstance(num_reads, bool) or int(num_reads) < 0):
            raise InvalidParameterError(f"num_reads must be >= 0; got {num_reads!r}")
        settings = NativeSettings(
            num_reads=None if num_reads is None else int(num_reads),
            **{name: params[name] for name in _SETTING_NAMES if name in params},
        )
        result = solve_bmf(
            structure.A,
            structure.rank,
            one_hot=structure.one_hot,
            initial_factors=initial_factors,
            seed=seed,
            settings=settings,
        )
        decoded = [
            DecodedSample(U=U, V=V, energy=float(error), error=int(error), broken={})
            for U, V, error in result.solutions
        ]
        result.info["backend"] = self.name
        return decoded, result.info

    def _sample(self, bqm: dimod.BinaryQuadraticModel, **params: Any) -> dimod.SampleSet:
        warnings.warn(
            "backend 'native' needs a plain BMF model (compiled.structure); this BQM has none, "
            "so it is sampled with the 'da' (Digital Annealer algorithm) backend instead",
            NativeFallbackWarning,
            stacklevel=3,
        )
        sampleset = DASampler()._sample(bqm, **params)
        sampleset.info["fallback"] = "da"
        return sampleset

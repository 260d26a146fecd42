"""``exact``: brute-force enumeration with :class:`dimod.ExactSolver` (tiny models only)."""

from __future__ import annotations

from typing import Any, ClassVar

import dimod

from bmfdsl.backends._common import BackendSampler
from bmfdsl.errors import InvalidParameterError

__all__ = ["ExactBackend"]


class ExactBackend(BackendSampler):
    """Enumerate all ``2**N`` states; refuses models with more than ``max_variables``.

    Every state is returned, lowest energy first, so the first sample is a certified optimum.

    >>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -1.0}, {("x", "y"): -3.0}, 0, "BINARY")
    >>> float(ExactBackend().sample(bqm).first.energy)
    -3.0
    """

    name: ClassVar[str] = "exact"
    descriptions: ClassVar[dict[str, str]] = {}  # it takes no keywords

    def __init__(self, max_variables: int = 20) -> None:
        if not 0 <= int(max_variables) <= 30:
            raise InvalidParameterError(
                f"max_variables must be in 0..30 (2**30 states); got {max_variables!r}"
            )
        self.max_variables = int(max_variables)

    def __repr__(self) -> str:
        return f"ExactBackend(max_variables={self.max_variables})"

    @property
    def properties(self) -> dict[str, Any]:
        """Adds ``max_variables``."""
        return {**super().properties, "max_variables": self.max_variables}

    def _sample(self, bqm: dimod.BinaryQuadraticModel) -> dimod.SampleSet:
        if bqm.num_variables > self.max_variables:
            raise InvalidParameterError(
                f"the exact backend enumerates 2**N states and refuses N = {bqm.num_variables} "
                f"> {self.max_variables} variables; use a heuristic backend such as 'neal' or "
                "'tabu', or shrink the problem"
            )
        sampleset = dimod.ExactSolver().sample(bqm)
        sampleset = dimod.SampleSet(
            sampleset.record[sampleset.record.energy.argsort(kind="stable")],
            sampleset.variables,
            dict(sampleset.info),
            sampleset.vartype,
        )
        return sampleset

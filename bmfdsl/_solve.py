"""Solve a compiled model on any backend by name, and sweep its penalty weights.

:func:`solve` splits its keywords into the model's penalty weights (``compiled.weight_names``)
and the backend's parameters. A structure-aware backend (one with ``sample_structure``) gets
``compiled.structure`` directly; any other backend samples ``compiled.to_bqm(**weights)``
and the samples come back through ``compiled.decode``.

>>> import numpy as np
>>> from bmfdsl.compile import compile_model
>>> compiled = compile_model("formulation1", np.array([[1, 1], [1, 1]]), 1)
>>> best = solve(compiled, "exact", lam=2.0)[0]
>>> best.error, best.U.ravel().tolist(), best.V.ravel().tolist()
(0, [1, 1], [1, 1])
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dimod

from bmfdsl.backends.registry import get_backend
from bmfdsl.errors import InvalidParameterError
from bmfdsl.result import DecodedSample

__all__ = ["SolveResult", "SweepResult", "SweepSetting", "solve", "sweep_weights"]


class SolveResult(list[DecodedSample]):
    """Decoded samples, best first (a ``list``), plus ``info`` about the solve.

    ``info`` holds the backend name, the weights used, ``time_s`` (wall seconds of the
    backend call) and the backend's own info (timings, settings, certificates).
    """

    def __init__(self, samples: Iterable[DecodedSample], info: dict[str, Any]) -> None:
        super().__init__(samples)
        self.info = info


def _resolve_backend(backend: str | dimod.Sampler) -> tuple[str, dimod.Sampler]:
    if isinstance(backend, str):
        return backend, get_backend(backend)
    if not isinstance(backend, dimod.Sampler) and not hasattr(backend, "sample_structure"):
        raise InvalidParameterError(
            f"backend must be a registered name or a dimod.Sampler; got {type(backend).__name__}"
        )
    return str(getattr(backend, "name", type(backend).__name__)), backend


def _one_hot_labels(compiled: Any) -> list[list[str]]:
    """The compiled model's one-hot groups as lists of labels (one list per constrained row)."""
    layout = compiled.layout
    variables = layout.variables
    return [
        [variables[int(position)] for position in row]
        for rows in layout.one_hot_groups.values()
        for row in rows
    ]


def solve(
    compiled: Any,
    backend: str | dimod.Sampler = "neal",
    *,
    native_one_hot: bool = False,
    **weights_and_params: Any,
) -> SolveResult:
    """Solve ``compiled`` on ``backend``; decoded samples best first.

    Args:
        compiled: a :class:`~bmfdsl.compiled.CompiledModel`.
        backend: a registered backend name (see :func:`bmfdsl.list_backends`) or a sampler.
        native_one_hot: pass the model's one-hot groups to the backend's ``one_hot_groups``
            parameter (e.g. ``fujitsu-da``) so the solver enforces them itself.
        **weights_and_params: penalty weights named in ``compiled.weight_names`` (e.g.
            ``lam=2.0``); everything else goes to the backend (``num_reads``, ``seed``, ...).

    Returns:
        A :class:`SolveResult`: a list of :class:`~bmfdsl.result.DecodedSample` (feasible
        first, then lowest error, then lowest energy) with ``.info``.
    """
    name, sampler = _resolve_backend(backend)
    weight_names = set(compiled.weight_names)
    weights = {k: v for k, v in weights_and_params.items() if k in weight_names}
    params = {k: v for k, v in weights_and_params.items() if k not in weight_names}
    info: dict[str, Any] = {"backend": name}
    start = time.perf_counter()
    if hasattr(sampler, "sample_structure") and compiled.structure is not None:
        decoded, backend_info = sampler.sample_structure(compiled.structure, **params)
        info.update(time_s=time.perf_counter() - start, weights=None, backend_info=backend_info)
        return SolveResult(decoded, info)
    resolved = compiled.resolve_weights(**weights)
    if native_one_hot:
        if "one_hot_groups" not in sampler.parameters:
            raise InvalidParameterError(
                f"backend {name!r} has no 'one_hot_groups' parameter; drop native_one_hot=True"
            )
        params["one_hot_groups"] = _one_hot_labels(compiled)
    bqm = compiled.to_bqm(**resolved)
    sampleset = sampler.sample(bqm, **params)
    info.update(
        time_s=time.perf_counter() - start, weights=resolved, backend_info=dict(sampleset.info)
    )
    return SolveResult(compiled.decode(sampleset), info)


@dataclass
class SweepSetting:
    """The outcome of one weight setting of :func:`sweep_weights`.

    ``energy``, ``error``, ``broken`` and ``feasible`` describe the solver's answer: its
    lowest-energy sample (ties: feasible, then lower error, first).

    Attributes:
        weights: the resolved weights.
        energy: the lowest energy sampled.
        error: ``||A - UVᵀ||²_F`` of the lowest-energy sample.
        broken: the broken constraints of that sample, per group.
        feasible: whether that sample breaks no constraint.
        best_feasible_error: the lowest error among all feasible samples (None: none).
        time_s: wall seconds of the solve.
        best: the lowest-energy decoded sample itself (not serialised).
    """

    weights: dict[str, float]
    energy: float
    error: int
    broken: dict[str, int]
    feasible: bool
    best_feasible_error: int | None
    time_s: float
    best: DecodedSample | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary (without the factor matrices)."""
        return {
            "weights": dict(self.weights),
            "energy": float(self.energy),
            "error": int(self.error),
            "broken": dict(self.broken),
            "feasible": bool(self.feasible),
            "best_feasible_error": self.best_feasible_error,
            "time_s": float(self.time_s),
        }


@dataclass
class SweepResult:
    """Every setting of a weight sweep, in the order tried.

    ``best`` is the setting whose lowest-energy sample is feasible with the lowest error
    (ties: the one tried first): the weights that make the solver's answer both valid and good.
    """

    backend: str
    settings: list[SweepSetting]

    @property
    def best(self) -> SweepSetting | None:
        """The best setting among those whose answer is feasible, or None if none is."""
        feasible = [s for s in self.settings if s.feasible]
        return min(feasible, key=lambda s: s.error) if feasible else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary."""
        best = self.best
        return {
            "backend": self.backend,
            "settings": [s.to_dict() for s in self.settings],
            "best": None if best is None else best.to_dict(),
        }


def _weight_values(name: str, values: Any) -> list[float]:
    if values is None:
        return []
    listed = list(values) if isinstance(values, Sequence | Iterable) else [values]
    if not listed:
        raise InvalidParameterError(f"{name} must list at least one value")
    for value in listed:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise InvalidParameterError(f"every {name} value must be a positive number; {value!r}")
        if not math.isfinite(value):
            raise InvalidParameterError(f"every {name} value must be finite; got {value!r}")
    return [float(v) for v in listed]


def sweep_weights(
    compiled: Any,
    backend: str | dimod.Sampler,
    *,
    lam: Sequence[float] | float,
    lam_onehot: Sequence[float] | float | None = None,
    **params: Any,
) -> SweepResult:
    """Solve ``compiled`` once per weight setting, from one compilation.

    Settings are every ``lam`` value, or every ``(lam, lam_onehot)`` pair when ``lam_onehot``
    lists values (``None``: the model's default, i.e. ``lam_onehot = lam``). ``params`` go to
    the backend unchanged for every setting (use a ``seed`` for comparable runs).

    >>> import numpy as np
    >>> from bmfdsl.compile import compile_model
    >>> compiled = compile_model("formulation1", np.array([[1, 0], [1, 1]]), 1)
    >>> result = sweep_weights(compiled, "exact", lam=[0.25, 2.0])
    >>> [s.feasible for s in result.settings], result.best.weights["lam"]
    ([False, True], 2.0)
    """
    name, sampler = _resolve_backend(backend)
    grid: list[dict[str, float]] = []
    lam_values = _weight_values("lam", lam)
    onehot_values = _weight_values("lam_onehot", lam_onehot)
    if onehot_values:
        grid = [
            {"lam": a, "lam_onehot": b} for a, b in itertools.product(lam_values, onehot_values)
        ]
    else:
        grid = [{"lam": a} for a in lam_values]
    settings = []
    for weights in grid:
        arguments: dict[str, Any] = {**weights, **params}
        solved = solve(compiled, sampler, **arguments)
        if not solved:
            raise InvalidParameterError(f"backend {name!r} returned no samples for {weights}")
        top = min(solved, key=lambda s: s.energy)  # first of equals: feasible, lower error
        feasible = [s.error for s in solved if s.feasible]
        resolved = solved.info["weights"] or compiled.resolve_weights(**weights)
        settings.append(
            SweepSetting(
                weights=dict(resolved),
                energy=min(s.energy for s in solved),
                error=top.error,
                broken=dict(top.broken),
                feasible=top.feasible,
                best_feasible_error=min(feasible) if feasible else None,
                time_s=float(solved.info["time_s"]),
                best=top,
            )
        )
    return SweepResult(backend=name, settings=settings)

"""Solve a compiled model on any backend by name, and sweep its penalty weights.

:func:`solve` splits its keywords into the model's penalty weights (``compiled.weight_names``)
and the backend's parameters. A structure-aware backend (a
:class:`~bmfdsl.modeling.StructuredSampler`) gets ``compiled.structure`` (only present when
the model's claim was verified); any other backend samples ``compiled.to_bqm(**weights)``.
Both answer with a ``dimod.SampleSet`` that comes back through ``compiled.decode``.

>>> import numpy as np
>>> from bmfdsl.modeling._compile import compile_model
>>> compiled = compile_model("formulation1", np.array([[1, 1], [1, 1]]), 1)
>>> best = solve(compiled, "exact", lam=2.0)[0]
>>> best.error, best.U.ravel().tolist(), best.V.ravel().tolist()
(0, [1, 1], [1, 1])
"""

from __future__ import annotations

import difflib
import itertools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import dimod

from bmfdsl.errors import InvalidParameterError, ModelDefinitionError, UnknownNameError
from bmfdsl.modeling import CompiledModel, StructuredSampler, check_weight
from bmfdsl.result import DecodedSample
from bmfdsl.solvers import DEFAULT_SOLVE_BACKEND, resolve_backend


class SolveResult(list[DecodedSample]):
    """Decoded samples, best first (a ``list``), plus ``info`` about the solve.

    ``info`` holds the backend name, the weights used, ``timings`` (``{"solve": seconds}``
    of the backend call) and the backend's own info (settings, work done, certificates).
    """

    def __init__(self, samples: Iterable[DecodedSample], info: dict[str, Any]) -> None:
        super().__init__(samples)
        self.info = info


def _check_compiled(compiled: Any) -> CompiledModel:
    if not isinstance(compiled, CompiledModel):
        raise InvalidParameterError(
            "expected a compiled model from bmfdsl.compile_model(model, A, rank); got "
            f"{type(compiled).__name__}"
        )
    return compiled


def _one_hot_labels(compiled: CompiledModel) -> list[list[str]]:
    """The compiled model's one-hot groups as lists of labels (one list per constrained row)."""
    layout = compiled.layout
    variables = layout.variables
    return [
        [variables[int(position)] for position in row]
        for rows in layout.one_hot_groups.values()
        for row in rows
    ]


def _check_keywords(
    params: Mapping[str, Any],
    compiled: CompiledModel,
    name: str,
    sampler: dimod.Sampler | StructuredSampler,
) -> None:
    """Refuse a keyword that is neither a weight of the model nor a parameter of the backend,
    listing both (a typo of a weight, ``lamm=2``, is named as such).

    >>> import numpy as np
    >>> from bmfdsl.modeling._compile import compile_model
    >>> compiled = compile_model("formulation1", np.array([[1, 1], [1, 1]]), 1)
    >>> try:
    ...     solve(compiled, "exact", lamm=2.0)
    ... except UnknownNameError as error:
    ...     for part in str(error).split("; "):
    ...         print(part)
    unknown keyword 'lamm'
    known keywords: 'lam'. Model 'formulation1' declares the weights ['lam'] (did you mean 'lam'?)
    backend 'exact' takes the parameters [].
    """
    known = list(sampler.parameters)
    for key in params:
        if key not in known:
            weights = list(compiled.weight_names)
            close = difflib.get_close_matches(key, weights, n=1)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownNameError(
                "keyword",
                key,
                [*weights, *known],
                hint=f"Model {compiled.model_name!r} declares the weights {weights}{guess}; "
                f"backend {name!r} takes the parameters {sorted(known)}.",
            )


def solve(
    compiled: CompiledModel,
    backend: str | dimod.Sampler | StructuredSampler = DEFAULT_SOLVE_BACKEND,
    *,
    native_one_hot: bool = False,
    **weights_and_params: Any,
) -> SolveResult:
    """Solve ``compiled`` on ``backend``; decoded samples best first.

    Args:
        compiled: a :class:`~bmfdsl.modeling.CompiledModel`.
        backend: a registered backend name (see :func:`bmfdsl.list_backends`) or a sampler.
        native_one_hot: pass the model's one-hot groups to the backend's ``one_hot_groups``
            parameter (e.g. ``fujitsu-da``) so the solver enforces them itself.
        **weights_and_params: penalty weights named in ``compiled.weight_names`` (e.g.
            ``lam=2.0``); everything else goes to the backend (``num_reads``, ``seed``, ...).

    Returns:
        A :class:`SolveResult`: a list of :class:`~bmfdsl.result.DecodedSample` (feasible
        first, then the model's error, then energy; energies recomputed from the BQM at the
        weights used) with ``.info``.

    Raises:
        ModelDefinitionError: a structure-aware backend and a model without a verified
            BMF structure.
        UnknownNameError: a keyword that is neither a weight of the model nor a parameter
            of the backend (both are listed).
    """
    compiled = _check_compiled(compiled)
    name, sampler = resolve_backend(backend, default=DEFAULT_SOLVE_BACKEND)
    weight_names = set(compiled.weight_names)
    weights = {k: v for k, v in weights_and_params.items() if k in weight_names}
    params = {k: v for k, v in weights_and_params.items() if k not in weight_names}
    resolved = compiled.resolve_weights(**weights)
    _check_keywords(params, compiled, name, sampler)
    start = time.perf_counter()
    if isinstance(sampler, StructuredSampler):
        if compiled.structure is None:
            raise ModelDefinitionError(
                f"backend {name!r} solves BMF structure directly, but model "
                f"{compiled.model_name!r} declares none (model.declare_bmf()); use a generic "
                "backend such as 'da' or 'neal'"
            )
        sampleset = sampler.sample_bmf(compiled.structure.resolved(resolved), **params)
    else:
        if native_one_hot:
            if "one_hot_groups" not in sampler.parameters:
                raise InvalidParameterError(
                    f"backend {name!r} has no 'one_hot_groups' parameter; drop native_one_hot=True"
                )
            params["one_hot_groups"] = _one_hot_labels(compiled)
        sampleset = sampler.sample(compiled.to_bqm(**resolved), **params)
    elapsed = time.perf_counter() - start
    decoded = compiled.decode(sampleset, **resolved)
    info = {
        "backend": name,
        "weights": resolved,
        "timings": {"solve": elapsed},
        "backend_info": dict(sampleset.info),
    }
    return SolveResult(decoded, info)


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
        timings: ``{"solve": seconds}`` of the backend call.
        best: the lowest-energy decoded sample itself (not serialised).
    """

    weights: dict[str, float]
    energy: float
    error: int | float
    broken: dict[str, int]
    feasible: bool
    best_feasible_error: int | float | None
    timings: dict[str, float]
    best: DecodedSample | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary (without the factor matrices)."""
        return {
            "weights": dict(self.weights),
            "energy": float(self.energy),
            "error": self.error,
            "broken": dict(self.broken),
            "feasible": bool(self.feasible),
            "best_feasible_error": self.best_feasible_error,
            "timings": dict(self.timings),
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


def _weight_values(name: str, values: Any, allow_zero: bool) -> list[float]:
    if isinstance(values, str | bytes | Mapping) or values is None:
        raise InvalidParameterError(
            f"{name} must be a positive number or a list of them; got {values!r}"
        )
    listed = list(values) if isinstance(values, Iterable) else [values]
    if not listed:
        raise InvalidParameterError(f"{name} must list at least one value")
    return [check_weight(name, value, allow_zero=allow_zero) for value in listed]


def sweep_weights(
    compiled: CompiledModel,
    backend: str | dimod.Sampler,
    **weights_and_params: Any,
) -> SweepResult:
    """Solve ``compiled`` once per weight setting, from one compilation.

    Every keyword named in ``compiled.weight_names`` lists values to try (a number is one
    value); the settings are their product, in order. Weights not given take the model's
    defaults. Other keywords go to the backend unchanged for every setting (use a ``seed``
    for comparable runs).

    >>> import numpy as np
    >>> from bmfdsl.modeling._compile import compile_model
    >>> compiled = compile_model("formulation1", np.array([[1, 0], [1, 1]]), 1)
    >>> result = sweep_weights(compiled, "exact", lam=[0.25, 2.0])
    >>> [s.feasible for s in result.settings], result.best.weights["lam"]
    ([False, True], 2.0)
    """
    compiled = _check_compiled(compiled)
    name, sampler = resolve_backend(backend, default=DEFAULT_SOLVE_BACKEND)
    penalty_weights = set(compiled.group_weights.values())
    axes = {
        key: _weight_values(key, values, allow_zero=key not in penalty_weights)
        for key, values in weights_and_params.items()
        if key in compiled.weight_names
    }
    params = {k: v for k, v in weights_and_params.items() if k not in compiled.weight_names}
    if not axes:
        raise InvalidParameterError(
            f"name at least one weight to sweep; model {compiled.model_name!r} declares "
            f"{list(compiled.weight_names)}"
        )
    grid: list[dict[str, Any]] = [
        dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())
    ]
    settings = []
    for weights in grid:
        solved = solve(compiled, sampler, **weights, **params)
        if not solved:
            raise InvalidParameterError(f"backend {name!r} returned no samples for {weights}")
        top = min(solved, key=lambda s: s.energy)  # first of equals: feasible, lower error
        feasible = [s.error for s in solved if s.feasible]
        settings.append(
            SweepSetting(
                weights=dict(solved.info["weights"]),
                energy=min(s.energy for s in solved),
                error=top.error,
                broken=dict(top.broken),
                feasible=top.feasible,
                best_feasible_error=min(feasible) if feasible else None,
                timings=dict(solved.info["timings"]),
                best=top,
            )
        )
    return SweepResult(backend=name, settings=settings)

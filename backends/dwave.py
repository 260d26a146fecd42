"""``dwave-qpu`` and ``dwave-hybrid``: D-Wave's Leap cloud through the Ocean SDK.

Credentials come from Ocean's own configuration (the ``DWAVE_API_TOKEN`` environment
variable or ``dwave config create``) or an explicit ``token=`` option. Constructing a
backend only reads that configuration; the cloud is contacted on the first ``sample`` call.
A child sampler can be injected (``child=``) to run offline, e.g.
``dwave.system.testing.MockDWaveSampler``. Tokens never appear in reprs or messages: a
token from ``token=`` or ``DWAVE_API_TOKEN`` is stripped of surrounding whitespace and
refused if it holds control characters, and an Ocean error quoting it is re-raised as a
:class:`~bmfdsl.errors.SolverError` with the token blanked out.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, ClassVar

import dimod
import numpy as np

from bmfdsl.backends._common import (
    BackendSampler,
    check_num_reads,
    check_seed,
    check_time_limit,
    given_options,
)
from bmfdsl.credentials import clean_credential, service_text
from bmfdsl.errors import BackendUnavailableError, BmfdslError, MissingCredentialsError, SolverError

__all__ = ["DWaveHybridBackend", "DWaveQPUBackend"]

TOKEN_VARIABLE = "DWAVE_API_TOKEN"
_NEEDS_DWAVE_SYSTEM = "D-Wave backends need dwave-system: pip install 'bmfdsl[dwave]'"


def _import_dwave_system() -> Any:
    try:
        import dwave.system
    except ImportError as exc:
        raise BackendUnavailableError(_NEEDS_DWAVE_SYSTEM) from exc
    return dwave.system


def _check_credentials(token: str | None) -> None:
    """Raise :class:`MissingCredentialsError` unless a Leap token is configured (no network)."""
    if token:
        return
    try:
        from dwave.cloud.config import load_config

        configured = load_config().get("token")
    except ImportError as exc:
        raise BackendUnavailableError(_NEEDS_DWAVE_SYSTEM) from exc
    except Exception:  # an unreadable config file counts as no token
        configured = None
    if not configured:
        raise MissingCredentialsError(
            f"no D-Wave Leap token found: set the {TOKEN_VARIABLE} environment variable, run "
            "'dwave config create', or pass token=... to get_backend()"
        )


def _clean_token(token: str | None) -> str | None:
    """The explicit or ``DWAVE_API_TOKEN`` token, cleaned; None leaves it to Ocean's config."""
    if token is not None:
        return clean_credential(token, "token")
    raw = os.environ.get(TOKEN_VARIABLE)
    if raw is None or not raw.strip():
        return None
    return clean_credential(raw, TOKEN_VARIABLE)


class _LeapBackend(BackendSampler):
    def __init__(
        self, child: dimod.Sampler | None = None, *, token: str | None = None, solver: Any = None
    ) -> None:
        if child is None:
            token = _clean_token(token)
            _check_credentials(token)
        self._child = child
        self._token = token
        self._solver = solver

    def sample(self, bqm: dimod.BinaryQuadraticModel, **params: Any) -> dimod.SampleSet:
        """Sample ``bqm``; an Ocean error quoting the token, or holding control characters,
        comes back as a :class:`SolverError` with them scrubbed and escaped."""
        try:
            return super().sample(bqm, **params)
        except BmfdslError:
            raise
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
            if service_text(text) == text:
                raise
            # from None: the original's message, chained, would show the token (or the
            # service's escapes and line breaks) again
            raise SolverError(f"the D-Wave call failed: {service_text(text)}") from None

    def __repr__(self) -> str:  # never shows the token
        child = "injected" if self._child is not None else "Leap"
        return f"{type(self).__name__}(child={child}, solver={self._solver!r})"

    def _connection(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self._token:
            options["token"] = self._token
        if self._solver is not None:
            options["solver"] = self._solver
        return options


class DWaveQPUBackend(_LeapBackend):
    """A D-Wave quantum annealer through ``EmbeddingComposite(DWaveSampler())``.

    QPU samples are physical and never reproducible, so there is no ``seed``;
    ``embedding_seed`` fixes minorminer's embedding heuristic.

    >>> from dwave.system.testing import MockDWaveSampler
    >>> qpu = DWaveQPUBackend(child=MockDWaveSampler())
    >>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -1.0}, {("x", "y"): -3.0}, 0, "BINARY")
    >>> float(qpu.sample(bqm, num_reads=10, embedding_seed=1).first.energy)
    -3.0
    """

    name: ClassVar[str] = "dwave-qpu"
    descriptions: ClassVar[dict[str, str]] = {
        "num_reads": "number of anneals",
        "embedding_seed": "random seed of the minor-embedding heuristic",
        "chain_strength": "coupling of embedded chains (None: Ocean's uniform torque)",
        "annealing_time": "microseconds per anneal (None: the QPU's own)",
        "auto_scale": "rescale biases to the QPU's ranges (None: the QPU's own)",
        "label": "problem label shown in the Leap dashboard",
        "return_embedding": "put the embedding in info['embedding_context']",
    }

    def __init__(
        self, child: dimod.Sampler | None = None, *, token: str | None = None, solver: Any = None
    ) -> None:
        super().__init__(child, token=token, solver=solver)
        self._composite: dimod.Sampler | None = None

    @property
    def properties(self) -> dict[str, Any]:
        """Adds the child's properties once connected (or injected)."""
        properties = super().properties
        if self._child is not None:
            properties["child_properties"] = dict(self._child.properties)
        return properties

    def _embedding_sampler(self) -> dimod.Sampler:
        if self._composite is None:
            system = _import_dwave_system()
            child = self._child
            if child is None:  # the first network access happens here
                child = system.DWaveSampler(**self._connection())
            self._composite = system.EmbeddingComposite(child)
        return self._composite

    def _sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        num_reads: int = 1,
        embedding_seed: int | None = None,
        chain_strength: Any = None,
        annealing_time: float | None = None,
        auto_scale: bool | None = None,
        label: str | None = None,
        return_embedding: bool | None = None,
    ) -> dimod.SampleSet:
        sampler = self._embedding_sampler()
        options = given_options(
            chain_strength=chain_strength,
            annealing_time=annealing_time,
            auto_scale=auto_scale,
            label=label,
            return_embedding=return_embedding,
        )
        embedding_seed = check_seed(embedding_seed)
        if embedding_seed is not None:
            options["embedding_parameters"] = {"random_seed": embedding_seed}
        return sampler.sample(bqm, num_reads=check_num_reads(num_reads), **options)


class DWaveHybridBackend(_LeapBackend):
    """D-Wave's Leap hybrid BQM solver (``LeapHybridSampler``), one sample per call.

    ``time_limit`` is raised to the solver's minimum for the model's size (with a warning);
    the default is that minimum. ``info`` records ``time_limit_s`` and
    ``minimum_time_limit_s``.
    """

    name: ClassVar[str] = "dwave-hybrid"
    descriptions: ClassVar[dict[str, str]] = {
        "time_limit": "seconds of solver run time; at least the solver's minimum for the model "
        "(None: that minimum)",
        "label": "problem label shown in the Leap dashboard",
    }

    def _hybrid_sampler(self) -> dimod.Sampler:
        if self._child is None:  # the first network access happens here
            self._child = _import_dwave_system().LeapHybridSampler(**self._connection())
        return self._child

    @staticmethod
    def minimum_time_limit(sampler: Any, bqm: dimod.BinaryQuadraticModel) -> float:
        """The solver's minimum ``time_limit`` for ``bqm`` (piecewise linear in its size)."""
        if hasattr(sampler, "min_time_limit"):
            return float(sampler.min_time_limit(bqm))
        sizes, seconds = zip(*sampler.properties["minimum_time_limit"], strict=True)
        return float(np.interp(bqm.num_variables, sizes, seconds))

    def _sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        time_limit: float | None = None,
        label: str | None = None,
    ) -> dimod.SampleSet:
        sampler = self._hybrid_sampler()
        minimum = self.minimum_time_limit(sampler, bqm)
        time_limit = minimum if time_limit is None else check_time_limit(time_limit)
        if time_limit < minimum:
            warnings.warn(
                f"time_limit={time_limit} s is below the hybrid solver's minimum of {minimum} s "
                f"for {bqm.num_variables} variables; using {minimum} s",
                UserWarning,
                stacklevel=3,
            )
            time_limit = minimum
        sampleset = sampler.sample(bqm, time_limit=time_limit, **given_options(label=label))
        sampleset.info["time_limit_s"] = time_limit
        sampleset.info["minimum_time_limit_s"] = minimum
        return sampleset

"""The backend registry: every solver by name, imported only when first used.

Names are normalised (case, ``-``/``_`` and spaces are equivalent), so ``"OpenJij_SA"`` is
``"openjij-sa"``. Third-party packages add backends through the entry-point group
``bmfdsl.backends`` (name -> ``"module:Class"``), or at run time with
:func:`register_backend`. A plug-in named like a built-in never replaces it: the built-in
is used and a warning names the plug-in's distribution (the mechanism is
:class:`bmfdsl.registry.Registry`, shared with models and methods).

:func:`resolve_backend` turns any entry point's ``backend`` argument (a name, a sampler or
``None``) into a sampler; the default each entry point uses lives here too
(``DEFAULT_*_BACKEND``), with the reason it differs.

>>> from bmfdsl.registry import normalize_name
>>> normalize_name("  OpenJij_SA ")
'openjij-sa'
>>> "neal" in [info.name for info in list_backends()]
True
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
from dataclasses import dataclass
from typing import Any

from bmfdsl.errors import BackendUnavailableError, InvalidParameterError
from bmfdsl.registry import Registry, check_known_names
from bmfdsl.validation import check_backend

ENTRY_POINT_GROUP = "bmfdsl.backends"

# The default backends, one home each. They differ on purpose (what each caller may meet):
#: solve() and sweep_weights() take any compiled model, claim or not: a generic BQM sampler
#: that ships with bmfdsl.
DEFAULT_SOLVE_BACKEND = "neal"
#: factorize() compiles plain BMF models whose structure is verified: the structure-aware
#: solver, the best local one (no account needed).
DEFAULT_FACTORIZE_BACKEND = "native"
#: BLS beyond enumeration (rank > 12) with a QUBO backend solves one tiny QUBO per distinct
#: row: simulated annealing with a few reads, seeded so that BLS stays deterministic.
DEFAULT_BLS_BACKEND = "neal"
DEFAULT_BLS_PARAMETERS: dict[str, Any] = {"num_reads": 10, "seed": 0}


@dataclass(frozen=True)
class BackendInfo:
    """What :func:`list_backends` knows about one backend (without importing it).

    Attributes:
        name: normalised name, e.g. ``"openjij-sa"``.
        available: whether its modules can be imported here.
        description: one line.
        extra: the ``bmfdsl`` extra that installs its dependencies (None: core).
        reason: why it is unavailable and how to fix it ("" when available).
        target: ``"module:attribute"`` of the sampler class or factory.
        credentials: ``None`` for a backend that needs none; else whether its credential
            (an environment variable, see :data:`CREDENTIAL_VARIABLES`) is set.
    """

    name: str
    available: bool
    description: str
    extra: str | None
    reason: str
    target: str
    credentials: bool | None = None

    @property
    def status(self) -> str:
        """One phrase: "available", "installed, no credentials (set X)" or why it is not."""
        if not self.available:
            return f"unavailable: {self.reason}"
        if self.credentials is False:
            return f"installed, no credentials (set {CREDENTIAL_VARIABLES[self.name]})"
        return "available"


#: The environment variable holding each cloud backend's credential.
CREDENTIAL_VARIABLES = {
    "dwave-qpu": "DWAVE_API_TOKEN",
    "dwave-hybrid": "DWAVE_API_TOKEN",
    "fujitsu-da": "BMFDSL_DA_API_KEY",
}


@dataclass(frozen=True)
class _Entry:
    target: str
    extra: str | None
    description: str
    requires: tuple[str, ...]  # modules that must be importable; "a|b": either will do


_BUILTINS: dict[str, _Entry] = {
    "exact": _Entry(
        "bmfdsl.backends.exact:ExactBackend",
        None,
        "dimod.ExactSolver: enumerates every state (at most 20 variables)",
        ("dimod",),
    ),
    "neal": _Entry(
        "bmfdsl.backends.neal:NealBackend",
        None,
        "simulated annealing from dwave-samplers",
        ("dwave.samplers|neal",),
    ),
    "tabu": _Entry(
        "bmfdsl.backends.neal:TabuBackend",
        None,
        "multistart tabu search from dwave-samplers",
        ("dwave.samplers",),
    ),
    "steepest": _Entry(
        "bmfdsl.backends.neal:SteepestBackend",
        None,
        "steepest greedy descent from dwave-samplers (polishes warm starts)",
        ("dwave.samplers",),
    ),
    "openjij-sa": _Entry(
        "bmfdsl.backends.openjij:OpenJijSABackend",
        "openjij",
        "OpenJij simulated annealing",
        ("openjij",),
    ),
    "openjij-sqa": _Entry(
        "bmfdsl.backends.openjij:OpenJijSQABackend",
        "openjij",
        "OpenJij simulated quantum annealing",
        ("openjij",),
    ),
    "dwave-qpu": _Entry(
        "bmfdsl.backends.dwave:DWaveQPUBackend",
        "dwave",
        "D-Wave quantum annealer through EmbeddingComposite (needs a Leap token)",
        ("dwave.system",),
    ),
    "dwave-hybrid": _Entry(
        "bmfdsl.backends.dwave:DWaveHybridBackend",
        "dwave",
        "D-Wave Leap hybrid BQM solver (needs a Leap token)",
        ("dwave.system",),
    ),
    "fujitsu-da": _Entry(
        "bmfdsl.backends.fujitsu_da:FujitsuDABackend",
        "fujitsu",
        "Fujitsu Digital Annealer v4 cloud API (needs BMFDSL_DA_API_KEY)",
        ("urllib3",),
    ),
    "native": _Entry(
        "bmfdsl.backends.native:NativeSampler",
        None,
        "bmfdsl's structure-aware numba solver for plain BMF models",
        ("numba",),
    ),
    "cpsat": _Entry(
        "bmfdsl.backends.cpsat:CpSatBackend",
        "exact",
        "OR-Tools CP-SAT: a proven optimum (or lower bound) of a small BQM",
        ("ortools",),
    ),
    "da": _Entry(
        "bmfdsl.backends.da:DASampler",
        None,
        "bmfdsl's numba emulation of the Digital Annealer's parallel-trial algorithm",
        ("numba",),
    ),
}

_BACKENDS: Registry[_Entry] = Registry(
    "backend",
    ENTRY_POINT_GROUP,
    _BUILTINS,
    lambda target: _Entry(target, None, f"third-party backend from {target}", ()),
    hint="See bmfdsl.list_backends() for what is installed.",
    register_function="register_backend",
)


def register_backend(
    name: str, target: str, *, extra: str | None = None, description: str = ""
) -> None:
    """Register a backend under ``name`` (replacing a previous registration of that name).

    Args:
        name: backend name; normalised.
        target: ``"module:attribute"``; the attribute is a :class:`dimod.Sampler` subclass or
            a factory taking the options of :func:`get_backend` and returning a sampler.
        extra: the ``bmfdsl`` extra (or a pip requirement) that installs its dependencies.
        description: one line for :func:`list_backends`.

    >>> register_backend("my-exact", "bmfdsl.backends.exact:ExactBackend")
    >>> type(get_backend("My_Exact")).__name__
    'ExactBackend'
    >>> unregister_backend("my-exact")
    """
    module, sep, attribute = target.partition(":")
    if not sep or not module or not attribute:
        raise InvalidParameterError(
            f"target must look like 'package.module:ClassName'; got {target!r}"
        )
    _BACKENDS.register(name, _Entry(target, extra, description, ()))


def unregister_backend(name: str) -> None:
    """Remove a backend added with :func:`register_backend` (built-ins stay)."""
    _BACKENDS.unregister(name)


def _install_hint(entry: _Entry) -> str:
    if entry.extra is None:
        return "reinstall bmfdsl"
    if re.fullmatch(r"[a-z0-9-]+", entry.extra):
        return f"pip install 'bmfdsl[{entry.extra}]'"
    return f"pip install '{entry.extra}'"


def _unavailable_reason(entry: _Entry) -> str:
    # The target's own package is looked up by its top-level name only: finding a submodule
    # would import (run) its parent packages, and listing a plug-in must not run its code.
    # A missing submodule shows on use, as a BackendUnavailableError.
    package = entry.target.partition(":")[0].partition(".")[0]
    for required in (*entry.requires, package):
        if not any(_module_exists(name) for name in required.split("|")):
            shown = " or ".join(repr(name) for name in required.split("|"))
            return f"module {shown} is not installed; {_install_hint(entry)}"
    return ""


def _module_exists(name: str) -> bool:
    # find_spec imports parent packages only (cheap namespaces here), never the module itself.
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _has_credentials(name: str) -> bool:
    """Is the backend's credential variable set (or, for D-Wave, an Ocean config file)?"""
    if os.environ.get(CREDENTIAL_VARIABLES[name]):
        return True
    if name.startswith("dwave-"):  # `dwave config create` writes the token to a file instead
        home = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        return any(
            os.path.isfile(path)
            for path in (os.path.join(home, "dwave", "dwave.conf"), "dwave.conf")
        )
    return False


def list_backends() -> list[BackendInfo]:
    """Every known backend, sorted by name, with its availability; imports no solver and no
    plug-in (plug-ins are read from their entry-point metadata and imported on use).

    >>> info = {b.name: b for b in list_backends()}["openjij-sa"]
    >>> info.extra
    'openjij'
    """
    infos = []
    for name, entry in sorted(_BACKENDS.entries().items()):
        reason = _unavailable_reason(entry)
        infos.append(
            BackendInfo(
                name=name,
                available=not reason,
                description=entry.description,
                extra=entry.extra,
                reason=reason,
                target=entry.target,
                credentials=_has_credentials(name) if name in CREDENTIAL_VARIABLES else None,
            )
        )
    return infos


def _load_target(name: str, entry: _Entry) -> Any:
    module_name, _, attribute = entry.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailableError(
            f"backend {name!r} cannot be imported ({exc}); {_install_hint(entry)}"
        ) from exc
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise BackendUnavailableError(
                f"backend {name!r}: {module_name!r} has no attribute {attribute!r}; "
                "fix the registration target"
            ) from exc
    return target


def check_backend_available(name: str) -> str:
    """The normalised name of an installed backend, checked without importing it.

    Raises:
        UnknownNameError: no backend has this name (the message lists the known ones).
        BackendUnavailableError: an optional dependency is missing (names the extra).

    >>> check_backend_available("OpenJij_SA")
    'openjij-sa'
    """
    return _available(name)[0]


def _available(name: str) -> tuple[str, _Entry]:
    key, entry = _BACKENDS.get(name)
    reason = _unavailable_reason(entry)
    if reason:
        raise BackendUnavailableError(f"backend {key!r} is unavailable: {reason}")
    return key, entry


def get_backend(name: str, **options: Any) -> Any:
    """Instantiate the backend called ``name`` with constructor ``options``.

    Returns a ``dimod.Sampler`` (samples BQMs) or a
    :class:`~bmfdsl.modeling.StructuredSampler` (solves a model's verified BMF structure).

    Raises:
        UnknownNameError: no backend has this name (the message lists the known ones), or an
            option is not accepted by the backend's constructor.
        BackendUnavailableError: an optional dependency is missing (names the extra).

    >>> type(get_backend("NEAL")).__name__
    'NealBackend'
    >>> get_backend("nael")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bmfdsl.errors.UnknownNameError: unknown backend 'nael'; known backends: 'cpsat', 'da', ...
    """
    key, entry = _available(name)
    factory = _load_target(key, entry)
    _check_options(key, factory, options)
    sampler = factory(**options)
    import dimod

    from bmfdsl.modeling import StructuredSampler

    if not isinstance(sampler, dimod.Sampler | StructuredSampler):
        raise BackendUnavailableError(
            f"backend {key!r} ({entry.target}) returned {type(sampler).__name__}, "
            "neither a dimod.Sampler nor a bmfdsl StructuredSampler; fix the backend"
        )
    return sampler


def resolve_backend(backend: Any, *, default: str) -> tuple[str, Any]:
    """``(name, sampler)`` for a backend name, a sampler, or ``None`` (the ``default`` name).

    The one way every entry point turns its ``backend`` argument into a sampler: a name is
    instantiated by :func:`get_backend` (and reported as given); a sampler (see
    :func:`bmfdsl.validation.check_backend`) is used as is, reported by its ``name`` or type.

    >>> name, sampler = resolve_backend(None, default=DEFAULT_SOLVE_BACKEND)
    >>> name, type(sampler).__name__
    ('neal', 'NealBackend')
    >>> resolve_backend(sampler, default="exact")[0]
    'neal'
    """
    check_backend(backend)
    if backend is None:
        backend = default
    if isinstance(backend, str):
        return backend, get_backend(backend)
    return str(getattr(backend, "name", type(backend).__name__)), backend


def _check_options(name: str, factory: Any, options: dict[str, Any]) -> None:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    known = [
        p.name
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if not accepts_any:
        check_known_names(
            options, known, kind="option", hint=f"These are the options of backend {name!r}."
        )

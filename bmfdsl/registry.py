"""Names and registries: one home for everything bmfdsl finds by name.

Backends, models and classical methods are each a :class:`Registry`: built-in entries, then
the plug-ins that installed packages declare in the registry's entry-point group
(``bmfdsl.backends``, ``bmfdsl.models``, ``bmfdsl.methods``), then names registered at run time.
Names are compared after :func:`normalize_name` (case, ``-``, ``_`` and spaces are
equivalent); a plug-in named like a built-in never replaces it (a warning names the plug-in's
distribution); an unknown name is an :class:`~bmfdsl.errors.UnknownNameError` listing the known
ones. Nothing is imported until an entry is used (:func:`import_target`). The installed
packages' entry points are scanned once per process (a scan reads every distribution's metadata:
5-10 ms, several times per :func:`~bmfdsl.factorize` call otherwise); a package installed
while the process runs shows after :func:`refresh_entry_points`.

This is a shared leaf: the modeling layer looks models up here, below the solvers.

>>> colours = Registry("colour", "bmfdsl.colours", {"dark-red": "#800000"}, str)
>>> colours.get("Dark_Red")
('dark-red', '#800000')
>>> colours.get("blue")
Traceback (most recent call last):
...
bmfdsl.errors.UnknownNameError: unknown colour 'blue'; known colours: 'dark-red'
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from bmfdsl.errors import InvalidParameterError, UnknownNameError, warn_caller

__all__ = [
    "Registry",
    "check_known_names",
    "import_target",
    "installed_entry_points",
    "normalize_name",
    "refresh_entry_points",
]

Entry = TypeVar("Entry")


def normalize_name(name: str, kind: str = "") -> str:
    """Lowercase ``name`` and turn runs of ``-``, ``_`` and spaces into one ``-``.

    >>> normalize_name("  OpenJij_SA "), normalize_name("Formulation2 reduced", "model")
    ('openjij-sa', 'formulation2-reduced')
    """
    if not isinstance(name, str):
        what = f"a {kind} name" if kind else "a name"
        raise InvalidParameterError(f"{what} must be a string; got {type(name).__name__}")
    return re.sub(r"[-_\s]+", "-", name.strip().lower())


def check_known_names(
    given: Iterable[str], known: Iterable[str], *, kind: str = "parameter", hint: str = ""
) -> None:
    """Raise :class:`UnknownNameError` (listing ``known``) for the first of ``given`` not known.

    The one check for keywords a backend, a model or an estimator does not take.

    >>> check_known_names(["seed", "num_sweps"], ["seed", "num_sweeps"], hint="Check it.")
    Traceback (most recent call last):
    ...
    bmfdsl.errors.UnknownNameError: unknown parameter 'num_sweps'; known parameters: ... Check it.
    """
    known = list(known)
    for name in given:
        if name not in known:
            raise UnknownNameError(kind, name, known, hint=hint)


def import_target(target: str) -> Any:
    """Import ``"package.module"`` (the module) or ``"package.module:attribute"`` (the attribute).

    >>> import_target("bmfdsl.errors:UnknownNameError").__name__
    'UnknownNameError'
    """
    module_name, _, attribute = target.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attribute.split(".") if attribute else ():
        value = getattr(value, part)
    return value


def installed_entry_points(group: str) -> tuple[Any, ...]:
    """The entry points installed packages declare in ``group``, scanned once per process.

    The scan is cached per scanning function, so a test that replaces
    ``importlib.metadata.entry_points`` sees its own entry points without a refresh.

    >>> installed_entry_points("bmfdsl.no-such-group")
    ()
    """
    return _scan_entry_points(importlib.metadata.entry_points, group)


def refresh_entry_points() -> None:
    """Forget the cached scans: the next lookup sees packages installed since the last one.

    >>> refresh_entry_points()
    """
    _scan_entry_points.cache_clear()


@functools.cache
def _scan_entry_points(scanner: Callable[..., Iterable[Any]], group: str) -> tuple[Any, ...]:
    return tuple(scanner(group=group))


# (group, name, entry-point value) of each clash already warned about: warn once per process.
_warned_clashes: set[tuple[str, str, str]] = set()


class Registry(Generic[Entry]):
    """Entries of one kind by normalised name: built-ins, installed plug-ins, run-time ones.

    Args:
        kind: what an entry is, for messages (``"backend"``, ``"model"``, ``"method"``).
        group: the entry-point group third-party packages declare plug-ins in.
        builtins: normalised name -> entry.
        from_entry_point: the entry for a plug-in, from its entry point's value
            (``"module:attribute"``).
        hint: appended to the unknown-name message (what else the caller accepts).
        register_function: the public function that registers an entry of this kind at run
            time, named in the clash warning (None: there is none).
    """

    def __init__(
        self,
        kind: str,
        group: str,
        builtins: Mapping[str, Entry],
        from_entry_point: Callable[[str], Entry],
        *,
        hint: str = "",
        register_function: str | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self.builtins = dict(builtins)
        self.from_entry_point = from_entry_point
        self.hint = hint
        self.register_function = register_function
        self.registered: dict[str, Entry] = {}

    def entries(self) -> dict[str, Entry]:
        """Every entry by name. Later sources win: built-ins, then installed plug-ins (never
        over a built-in), then run-time registrations (an explicit choice of the program)."""
        return {**self.builtins, **self._plugins(), **self.registered}

    def get(self, name: Any) -> tuple[str, Entry]:
        """``(normalised name, entry)``; an unknown name (or a non-string) lists the known ones."""
        entries = self.entries()
        key = normalize_name(name, self.kind) if isinstance(name, str) else None
        if key is None or key not in entries:
            raise self.unknown(name, entries)
        return key, entries[key]

    def unknown(self, name: Any, entries: Iterable[str] | None = None) -> UnknownNameError:
        """The error for a name not known here: it lists the known ones."""
        known = self.entries() if entries is None else entries
        return UnknownNameError(self.kind, name, known, hint=self.hint)

    def find(self, name: str) -> tuple[str, Entry] | None:
        """``(normalised name, entry)``, or None for a name not known here.

        A built-in or run-time name is answered without looking at the installed packages'
        entry points: ``compile_model`` looks its model up on every call.
        """
        key = normalize_name(name, self.kind)
        if key in self.registered or key in self.builtins:
            return key, {**self.builtins, **self.registered}[key]
        entries = self.entries()
        return (key, entries[key]) if key in entries else None

    def register(self, name: str, entry: Entry) -> None:
        """Add (or replace) the run-time entry ``name``."""
        self.registered[normalize_name(name, self.kind)] = entry

    def unregister(self, name: str) -> None:
        """Remove a run-time entry (built-ins and plug-ins stay)."""
        self.registered.pop(normalize_name(name, self.kind), None)

    def _plugins(self) -> dict[str, Entry]:
        """Installed plug-ins; one named like a built-in is skipped with a warning (once)."""
        found: dict[str, Entry] = {}
        for entry_point in installed_entry_points(self.group):
            name = normalize_name(entry_point.name, self.kind)
            if name in self.builtins:
                self._warn_clash(name, entry_point)
                continue
            found[name] = self.from_entry_point(entry_point.value)
        return found

    def _warn_clash(self, name: str, entry_point: Any) -> None:
        if (self.group, name, entry_point.value) in _warned_clashes:
            return
        _warned_clashes.add((self.group, name, entry_point.value))
        owner = getattr(getattr(entry_point, "dist", None), "name", None)
        rename = f", or {self.register_function}() it under another name"
        warn_caller(
            f"the installed package {owner or 'an unknown distribution'!r} declares a "
            f"{self.kind} named {name!r} ({entry_point.value}), which is a built-in name; the "
            f"built-in is used. Ask its authors to rename it"
            f"{rename if self.register_function else ''}",
            UserWarning,
        )

"""The paper's experiments (Tables 1-6, Figs 1-2): resumable runs, reports and figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bmfdsl._lazy import lazy_exports

if TYPE_CHECKING:
    from bmfdsl.apps.experiments._cli import add_subcommands
    from bmfdsl.apps.experiments._scheduling import run_experiment

__getattr__, __dir__, __all__ = lazy_exports(globals())

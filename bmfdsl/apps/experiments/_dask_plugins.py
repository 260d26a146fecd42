"""Dask worker plugins of the experiment runner (imported only where Dask is installed)."""

from __future__ import annotations

import contextlib
import signal
from typing import Any

from distributed import WorkerPlugin


class IgnoreSigint(WorkerPlugin):  # type: ignore[misc]
    """The worker process ignores Ctrl-C: the runner's process handles it and stops workers.

    Ctrl-C at a terminal reaches every process of the group; without this each worker
    printed its own traceback. Registered as a plugin, it also covers restarted workers.
    """

    def setup(self, worker: Any) -> None:
        with contextlib.suppress(ValueError):  # only the main thread may set handlers
            signal.signal(signal.SIGINT, signal.SIG_IGN)

"""Run (or finish) a whole experiment: what is left, serially or on Dask workers, resumably.

One runner per results folder (a lock file); each finished run is appended to the JSONL file
at once, so an interrupted call loses nothing; ``OUT/<experiment>.meta.json`` records the
call (settings, versions, machine). The runs themselves are :mod:`._runner`'s.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import signal
import sys
import threading
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bmfdsl.apps._io import write_text_atomic
from bmfdsl.apps.experiments._records import lock_out_dir, read_records
from bmfdsl.apps.experiments._run_progress import RunProgress
from bmfdsl.apps.experiments._runner import (
    Method,
    RunTask,
    append_record,
    build_matrix,
    execute_run,
    plan_runs,
    record_seconds,
    resolve_methods,
    results_path,
)
from bmfdsl.apps.experiments._tables import Experiment, get_experiment
from bmfdsl.errors import BackendUnavailableError, BmfdslError, InvalidParameterError
from bmfdsl.result import to_jsonable


class RunRecords(list[dict[str, Any]]):
    """The successful records of an experiment's planned runs (a list), and what failed.

    Attributes:
        planned: the number of runs the call planned.
        failed: how many of them failed in this call (each is recorded in the JSONL file
            with its message; re-running retries them).
    """

    def __init__(self, records: Iterable[dict[str, Any]], *, planned: int, failed: int) -> None:
        super().__init__(records)
        self.planned = planned
        self.failed = failed


def _data_dir_text(data_dir: str | os.PathLike[str] | None) -> str | None:
    """The data folder as an absolute path (workers may run elsewhere), or ``None``."""
    if data_dir is None and os.environ.get("BMFDSL_DATA_DIR"):
        data_dir = os.environ["BMFDSL_DATA_DIR"]
    return None if data_dir is None else str(Path(data_dir).resolve())


def check_experiment_data(
    name: str,
    *,
    sizes: Sequence[Any] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
) -> None:
    """Fail now when the data an experiment needs cannot be read (``experiment all`` checks
    every table before the first run; :func:`run_experiment` checks its own).

    >>> check_experiment_data("table2")  # synthetic data: nothing to read
    """
    experiment = get_experiment(name)
    folder = _data_dir_text(data_dir)
    one_per_instance = plan_runs(
        experiment, sizes=sizes, ranks=[1], trials=1, methods=["-"], data_dir=folder
    )
    _check_data(experiment, one_per_instance)


def _check_data(experiment: Experiment, tasks: Sequence[RunTask]) -> None:
    """Load each data set the runs need once, before any run: a missing folder is one error.

    Without this, every run of Table 5 failed on its own (2,000 failed records).
    """
    if experiment.kind not in ("mnist", "gene"):
        return
    firsts: dict[str, RunTask] = {}
    for task in tasks:
        firsts.setdefault(task.instance.dataset, task)
    for dataset, task in firsts.items():
        try:
            build_matrix(experiment, task)
        except (OSError, ValueError, BmfdslError) as exc:
            raise InvalidParameterError(
                f"{experiment.name} needs the {dataset} data, checked before any run: {exc} "
                "(`bmfdsl datasets check DIR` checks a data folder)"
            ) from exc


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("bmfdsl", "numpy", "scipy", "numba", "dimod", "dask", "distributed"):
        try:
            module = __import__(name)
            versions[name] = str(getattr(module, "__version__", "?"))
        except ImportError:
            continue
    return versions


def _new_meta(experiment: str, settings: Mapping[str, Any], command: str | None) -> dict:
    """What a results folder records about the call that wrote it."""
    return {
        "experiment": experiment,
        "settings": to_jsonable(dict(settings)),
        "command": command or " ".join(sys.argv),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "versions": _versions(),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
    }


def _write_meta(out_dir: Path, experiment: str, meta: Mapping[str, Any]) -> None:
    path = out_dir / f"{experiment}.meta.json"
    write_text_atomic(path, json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _run_serial(
    tasks: Iterable[RunTask], methods: Mapping[str, Method]
) -> Generator[dict[str, Any], None, None]:
    for task in tasks:
        yield execute_run(task, methods[task.method])


@contextlib.contextmanager
def _no_sigint() -> Generator[None, None, None]:
    """Processes started inside ignore Ctrl-C (they inherit it), so only this one sees it.

    Ctrl-C at a terminal reaches every process of the group: the Dask workers each printed
    their own traceback. Now this process alone is interrupted and shuts the workers down.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_dask(
    tasks: list[RunTask],
    methods: Mapping[str, Method],
    *,
    workers: int,
    scheduler: str | None,
) -> Generator[dict[str, Any], None, None]:
    try:
        from dask.distributed import Client, as_completed
    except ImportError as exc:
        raise BackendUnavailableError(
            "parallel runs need Dask: pip install 'bmfdsl[dask]' (or run with --workers 1)"
        ) from exc
    cluster = None
    if scheduler is None:
        client, cluster = _start_local_cluster(workers)
    else:
        client = Client(scheduler)
    try:
        futures = [
            client.submit(execute_run, task, methods[task.method], key=f"run-{task.run_id}")
            for task in tasks
        ]
        for future in as_completed(futures):
            yield future.result()
    finally:
        _close_quietly(client, cluster)


def _start_local_cluster(workers: int) -> tuple[Any, Any]:
    """``(client, cluster)`` of ``workers`` local single-threaded processes that ignore Ctrl-C."""
    import dask
    from dask.distributed import Client, LocalCluster

    # Dask's workers start with MALLOC_TRIM_THRESHOLD_=65536, which makes glibc hand every
    # multi-MB numpy temporary back to the OS and fault it in again: the penalized method
    # ran 3x slower (14.5 s vs 5.0 s at 50,000 x 30). Larger thresholds keep the heap.
    environ = {
        **dask.config.get("distributed.nanny.pre-spawn-environ", default={}),
        "MALLOC_TRIM_THRESHOLD_": 128 * 2**20,
        "MALLOC_MMAP_THRESHOLD_": 64 * 2**20,
        # A run's failure is caught and recorded by execute_run; what workers would log
        # is shutdown noise (on Ctrl-C each printed a traceback), so only critical lines.
        "DASK_LOGGING__DISTRIBUTED": "critical",
    }
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}), _no_sigint():
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            # the scheduler serves HTTP routes even without a dashboard, by default on
            # port 8787: a free port instead, so no second run warns "already in use"
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        )
    client = Client(cluster)
    # also workers the nanny restarts later: Ctrl-C is for this process, which stops them
    from bmfdsl.apps.experiments._dask_plugins import IgnoreSigint

    client.register_plugin(IgnoreSigint(), name="bmfdsl-ignore-sigint")
    return client, cluster


def _close_quietly(client: Any, cluster: Any | None) -> None:
    """Close the client (and a local cluster) without Dask's shutdown warnings."""
    # a worker still busy in a run is killed on shutdown: expected, not worth a warning
    log = logging.getLogger("distributed")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        client.close()
        if cluster is not None:
            cluster.close()
    finally:
        log.setLevel(level)


def run_experiment(
    name: str,
    out_dir: str | os.PathLike[str],
    *,
    sizes: Sequence[Any] | None = None,
    ranks: Sequence[int] | None = None,
    trials: int | None = None,
    methods: Sequence[str] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    seed: int = 0,
    method_table: Mapping[str, Method] | None = None,
    progress: bool = True,
    command: str | None = None,
) -> RunRecords:
    """Run (or finish) one of the paper's experiments and return its records.

    Args:
        name: ``"table1"`` ... ``"table6"``.
        out_dir: folder for ``<name>.jsonl`` and ``<name>.meta.json`` (created if needed).
        sizes: row counts (Tables 1-4), images per digit (Table 5) or data-set names
            (Table 6); default the paper's.
        ranks: target ranks; default 1..5.
        trials: trials per instance and rank; default the paper's.
        methods: method names (see :func:`resolve_methods`); default
            ``bmfdsl, penalized, thresholded, baseline`` (Table 6 adds ``bmfdsl-no-onehot``).
        workers: local worker processes; ``1`` runs serially in this process; default the
            number of CPUs. Ignored when ``scheduler`` is given.
        scheduler: address of a Dask distributed scheduler (``tcp://host:8786``); the
            workers need bmfdsl installed and the data folder at the same path. The
            scheduler is trusted: Dask sends it pickled functions and unpickles what it
            returns, so connect only to a cluster you control.
        data_dir: folder with ``mnist/``, ``leukemia/``, ``melanoma/``; default
            ``$BMFDSL_DATA_DIR``.
        seed: base seed of all runs.
        method_table: extra or replacement methods by name.
        progress: draw a progress bar on stderr.
        command: the command line to record with the results (default ``sys.argv``).

    Returns:
        The successful records of the planned runs, old and new, as a :class:`RunRecords`
        list whose ``failed`` counts the runs that failed in this call.

    Raises:
        InvalidParameterError: bad settings, or a data set the runs need cannot be read
            (checked before any run starts, on this machine: not with ``scheduler``).
    """
    experiment = get_experiment(name)
    resolved = resolve_methods(methods, method_table, defaults=experiment.default_methods)
    data_text = _data_dir_text(data_dir)
    tasks = plan_runs(
        experiment,
        sizes=sizes,
        ranks=ranks,
        trials=trials,
        methods=list(resolved),
        seed=seed,
        data_dir=data_text,
    )
    if workers is not None and (isinstance(workers, bool) or workers < 1):
        raise InvalidParameterError(f"workers must be a positive integer; got {workers!r}")
    if scheduler is None:  # a cluster's workers may hold data this machine does not
        _check_data(experiment, tasks)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with lock_out_dir(out):  # one runner per folder: two would compute every run twice
        return _run_locked(
            name,
            experiment,
            tasks,
            resolved,
            out,
            sizes,
            trials,
            workers,
            scheduler,
            seed,
            progress,
            command,
        )


def _run_locked(
    name: str,
    experiment: Experiment,
    tasks: list[RunTask],
    resolved: Mapping[str, Method],
    out: Path,
    sizes: Sequence[Any] | None,
    trials: int | None,
    workers: int | None,
    scheduler: str | None,
    seed: int,
    progress: bool,
    command: str | None,
) -> RunRecords:
    path = results_path(out, name)
    stored = read_records(path)
    if stored.skipped:
        print(stored.skipped_summary(path), file=sys.stderr)
    if stored.conflicts():
        print(f"warning: {stored.conflicts_summary(path)}", file=sys.stderr)
    finished = {r["run_id"]: r for r in stored.records if r["status"] == "ok"}
    todo = [task for task in tasks if task.run_id not in finished]
    meta = _new_meta(
        name,
        {
            "sizes": list(experiment.parse_sizes(sizes)),
            "ranks": sorted({t.rank for t in tasks}),
            "trials": trials if trials is not None else experiment.default_trials,
            "methods": list(resolved),
            "seed": seed,
            "workers": workers,
            "scheduler": scheduler,
        },
        command,
    )
    _write_meta(out, name, meta)
    started = time.perf_counter()
    bar = RunProgress(tasks, todo, name) if progress else None
    stream = _stream_runs(todo, resolved, workers=workers, scheduler=scheduler)
    failures = _append_as_finished(stream, path, finished, todo, bar)
    # this call's part only: a resumed call records its own wall time and runs
    meta.update(
        finished=datetime.now(UTC).isoformat(timespec="seconds"),
        wall_seconds=round(time.perf_counter() - started, 1),
        runs_this_call=len(todo),
    )
    _write_meta(out, name, meta)
    if failures:
        print(
            f"{failures} run(s) failed (recorded in {path}); re-running retries them",
            file=sys.stderr,
        )
    ok = [finished[t.run_id] for t in tasks if t.run_id in finished]
    return RunRecords(ok, planned=len(tasks), failed=failures)


def _stream_runs(
    todo: list[RunTask],
    methods: Mapping[str, Method],
    *,
    workers: int | None,
    scheduler: str | None,
) -> Generator[dict[str, Any], None, None]:
    """The records of ``todo`` as they finish: in this process, or on Dask workers."""
    serial = scheduler is None and (workers or os.cpu_count() or 1) == 1
    if serial or len(todo) <= 1:
        return _run_serial(todo, methods)
    count = min(workers or os.cpu_count() or 1, len(todo))
    return _run_dask(todo, methods, workers=count, scheduler=scheduler)


def _append_as_finished(
    stream: Generator[dict[str, Any], None, None],
    path: Path,
    finished: dict[str, dict[str, Any]],
    todo: Sequence[RunTask],
    bar: RunProgress | None,
) -> int:
    """Append each record of ``stream`` to ``path`` as it comes; returns the failed runs.

    Successful records are added to ``finished``. The stream is closed (a local Dask
    cluster shut down) and the bar too, also on Ctrl-C, which says what was saved.
    """
    by_id = {task.run_id: task for task in todo}
    failures = 0
    earlier = len(finished)  # successful runs saved by earlier calls
    saved = 0  # records this call appended (successful or not)
    try:
        for record in stream:
            append_record(path, record)
            saved += 1
            if record["status"] == "ok":
                finished[record["run_id"]] = record
            else:
                failures += 1
                print(f"\n{record['run_id']} failed: {record['message']}", file=sys.stderr)
            if bar is not None:
                seconds = record_seconds(record)  # records keep it in timings["total"]
                bar.finished(by_id.get(record["run_id"]), seconds if seconds >= 0 else None)
    except KeyboardInterrupt:
        # one line, printed by whoever catches it (the CLI): no partial state is lost;
        # counted as appended, so a run cut off mid-way is not among them
        raise KeyboardInterrupt(
            f"{saved} run(s) of this call and {earlier} earlier successful one(s) are saved "
            f"in {path}; run the same command again to finish the rest"
        ) from None
    finally:
        stream.close()  # shuts a local Dask cluster down now, also on interruption
        if bar is not None:
            bar.close()
    return failures

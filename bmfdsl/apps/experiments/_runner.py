"""Run the paper's experiments: seeded runs, appended to JSONL as each finishes, resumable.

Every run (instance, method, rank, trial) has a stable id and a seed derived from it, so a
run gives the same result serially, on local Dask processes or on a distributed cluster.
Results go to ``OUT/<experiment>.jsonl``, one JSON object per line, written and flushed as
soon as a run finishes; re-running the same command skips the runs already in the file.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import platform
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bmfdsl.apps.experiments._clustering import adjusted_rand_index, clusters_from_factor
from bmfdsl.apps.experiments._records import (
    append_line,
    lock_out_dir,
    read_records,
    write_text_atomic,
)
from bmfdsl.apps.experiments._tables import (
    DEFAULT_METHODS,
    Experiment,
    Instance,
    MethodSettings,
    get_experiment,
    method_settings,
    stable_seed,
)
from bmfdsl.credentials import scrub
from bmfdsl.errors import BackendUnavailableError, InvalidParameterError, UnknownNameError
from bmfdsl.result import Factorization, to_jsonable

__all__ = [
    "CostModel",
    "Method",
    "RunTask",
    "append_record",
    "build_matrix",
    "execute_run",
    "load_records",
    "plan_runs",
    "record_seconds",
    "resolve_methods",
    "results_path",
    "run_experiment",
]

Method = Callable[[np.ndarray, int, MethodSettings], Factorization]
"""A method: ``(A, rank, settings) -> Factorization``."""


# --------------------------------------------------------------------------------------
# Methods
# --------------------------------------------------------------------------------------


def _factorize() -> Callable[..., Factorization]:
    from bmfdsl.pipeline import factorize

    return factorize


def _run_default(A: np.ndarray, rank: int, settings: MethodSettings) -> Factorization:
    """``bmfdsl``: ``factorize`` with its defaults (plus the experiment's one-hot constraint)."""
    return _factorize()(A, rank, one_hot=settings.one_hot, random_state=settings.random_state)


def _run_comparison(
    A: np.ndarray, rank: int, settings: MethodSettings, *, method: str
) -> Factorization:
    # The paper's comparison rows have no ALS polish: only BLS for U after sampling.
    return _factorize()(
        A,
        rank,
        method=method,
        sample_rows=settings.sample_rows,
        als=False,
        random_state=settings.random_state,
    )


def _run_qubo(
    A: np.ndarray, rank: int, settings: MethodSettings, *, backend: str, als: bool
) -> Factorization:
    """The paper's pipeline: sample rows when tall, solve the QUBO, BLS, optional ALS."""
    return _factorize()(
        A,
        rank,
        method="qubo",
        backend=backend,
        one_hot=settings.one_hot,
        sample_rows=settings.sample_rows,
        als=als,
        random_state=settings.random_state,
    )


def _run_without_one_hot(A: np.ndarray, rank: int, settings: MethodSettings) -> Factorization:
    """``bmfdsl-no-onehot``: ``factorize`` with its defaults and no one-hot constraint."""
    return _factorize()(A, rank, random_state=settings.random_state)


BUILTIN_METHODS: dict[str, Method] = {
    "bmfdsl": _run_default,
    "bmfdsl-no-onehot": _run_without_one_hot,
    "penalized": functools.partial(_run_comparison, method="penalized"),
    "thresholded": functools.partial(_run_comparison, method="thresholded"),
    "baseline": functools.partial(_run_comparison, method="baseline"),
}


def _check_backend(name: str) -> None:
    """Fail before any run when a ``qubo:<backend>`` names no usable backend."""
    from bmfdsl.solvers import check_backend_available

    check_backend_available(name)


def resolve_methods(
    names: Sequence[str] | None,
    method_table: Mapping[str, Method] | None = None,
    *,
    defaults: Sequence[str] = DEFAULT_METHODS,
) -> dict[str, Method]:
    """Map method names to callables.

    Known names: ``bmfdsl``, ``bmfdsl-no-onehot``, ``penalized``, ``thresholded``,
    ``baseline``, and
    ``qubo:<backend>`` / ``qubo:<backend>+als`` for any registered backend. ``method_table``
    adds or overrides names.

    >>> sorted(resolve_methods(["baseline", "qubo:neal+als"]))
    ['baseline', 'qubo:neal+als']
    """
    table = {**BUILTIN_METHODS, **(method_table or {})}
    resolved: dict[str, Method] = {}
    for name in names or defaults:
        if name in table:
            resolved[name] = table[name]
        elif name.startswith("qubo:") and len(name) > len("qubo:"):
            backend = name[len("qubo:") :]
            als = backend.endswith("+als")
            backend = backend.removesuffix("+als")
            if not backend:
                raise InvalidParameterError(f"method {name!r} names no backend; e.g. qubo:neal")
            _check_backend(backend)
            resolved[name] = functools.partial(_run_qubo, backend=backend, als=als)
        else:
            raise UnknownNameError(
                "method", name, table, hint="or qubo:<backend>[+als] for any registered backend"
            )
    return resolved


# --------------------------------------------------------------------------------------
# Runs and their data
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunTask:
    """Everything a worker needs to do one run (small and picklable)."""

    run_id: str
    experiment: str
    instance: Instance
    method: str
    rank: int
    trial: int
    seed: int
    data_seed: int
    data_dir: str | None


def plan_runs(
    experiment: Experiment,
    *,
    sizes: Sequence[Any] | None = None,
    ranks: Sequence[int] | None = None,
    trials: int | None = None,
    methods: Sequence[str] = DEFAULT_METHODS,
    seed: int = 0,
    data_dir: str | None = None,
) -> list[RunTask]:
    """All runs of an experiment, in a fixed order, each with its own seeds.

    The data seed depends on the instance and trial (and on the rank in Table 1, whose
    planted rank is the target rank), not on the method: every method sees the same matrix.
    """
    ranks = tuple(ranks or experiment.default_ranks)
    for rank in ranks:
        if isinstance(rank, bool) or not isinstance(rank, int | np.integer) or rank < 1:
            raise InvalidParameterError(f"ranks must be positive integers; got {rank!r}")
    trials = experiment.default_trials if trials is None else trials
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise InvalidParameterError(f"trials must be a positive integer; got {trials!r}")
    tasks = []
    for instance in experiment.instances(sizes):
        for rank in ranks:
            for trial in range(trials):
                data_rank = rank if experiment.kind == "exact" else 0
                data_seed = stable_seed(seed, experiment.name, instance.key, data_rank, trial)
                for method in methods:
                    run_id = (
                        f"{experiment.name}|{instance.key}|{method}|r={rank}|t={trial}|s={seed}"
                    )
                    tasks.append(
                        RunTask(
                            run_id=run_id,
                            experiment=experiment.name,
                            instance=instance,
                            method=method,
                            rank=int(rank),
                            trial=trial,
                            seed=stable_seed(data_seed, method, rank),
                            data_seed=data_seed,
                            data_dir=data_dir,
                        )
                    )
    return tasks


@functools.lru_cache(maxsize=4)
def _mnist(data_dir: str | None, per_digit: int) -> tuple[np.ndarray, np.ndarray]:
    from bmfdsl.apps._datasets import load_mnist

    return load_mnist(data_dir, per_digit=per_digit)


@functools.lru_cache(maxsize=4)
def _gene(name: str, data_dir: str | None) -> Any:
    from bmfdsl.apps import _datasets as datasets

    loader = datasets.load_leukemia if name == "leukemia" else datasets.load_melanoma
    return loader(data_dir)


def build_matrix(
    experiment: Experiment, task: RunTask
) -> tuple[np.ndarray, dict[str, tuple[str, ...]]]:
    """The run's data matrix and, for gene data, the known sample classes."""
    from bmfdsl.apps._datasets import make_bernoulli, make_exact_rank

    params = task.instance.params
    if experiment.kind == "exact":
        return make_exact_rank(params["m"], params["n"], task.rank, random_state=task.data_seed), {}
    if experiment.kind == "bernoulli":
        return make_bernoulli(params["m"], params["n"], params["p"], task.data_seed), {}
    if experiment.kind == "mnist":
        images, _ = _mnist(task.data_dir, params["per_digit"])
        return images[params["digit"] * params["per_digit"] + params["image"]], {}
    data = _gene(task.instance.dataset, task.data_dir)
    return data.matrix, data.classes


def execute_run(task: RunTask, method: Method) -> dict[str, Any]:
    """Do one run and return its JSONL record (never raises for a failing method)."""
    experiment = get_experiment(task.experiment)
    record: dict[str, Any] = {
        "run_id": task.run_id,
        "experiment": task.experiment,
        "table": experiment.number,
        "dataset": task.instance.dataset,
        "group": task.instance.group,
        "paper_m": task.instance.paper_m,
        "instance": task.instance.key,
        "params": to_jsonable(task.instance.params),
        "method": task.method,
        "rank": task.rank,
        "trial": task.trial,
        "seed": task.seed,
        "data_seed": task.data_seed,
    }
    try:
        A, classes = build_matrix(experiment, task)
        settings = method_settings(experiment, task.method, A.shape[0], task.seed)
        record.update(m=int(A.shape[0]), n=int(A.shape[1]), settings=asdict(settings))
        started = time.perf_counter()
        result = method(A, task.rank, settings)
        elapsed = time.perf_counter() - started
    except Exception as exc:
        record.update(  # scrubbed: a credential quoted by a failing service never lands here
            status="failed",
            message=scrub(f"{type(exc).__name__}: {exc}"),
            traceback=scrub(traceback.format_exc(limit=-4)),
        )
        return record
    info = result.info or {}
    record.update(
        status="ok",
        error=int(result.error),
        relative_error=float(result.relative_error),
        # seconds per stage of the method; "total" is the whole call as the runner timed it
        timings=to_jsonable({**info.get("timings", {}), "total": elapsed}),
        backend=to_jsonable(info.get("backend")),
        broken_constraints=to_jsonable(dict(result.broken_constraints)),
        # proven by the result's lower bound (bmfdsl.pipeline._bounds), whichever method produced it
        lower_bound=int(result.lower_bound),
        gap=float(result.gap),
        certified_optimal=bool(result.certified_optimal),
    )
    if classes:
        clusters = clusters_from_factor(result.V)
        record["ari"] = {
            name: adjusted_rand_index(labels, clusters) for name, labels in classes.items()
        }
    return record


# --------------------------------------------------------------------------------------
# The JSONL file
# --------------------------------------------------------------------------------------


def results_path(out_dir: str | os.PathLike[str], experiment: str) -> Path:
    """Where an experiment's records live: ``OUT/<experiment>.jsonl``."""
    return Path(out_dir) / f"{experiment}.jsonl"


def record_seconds(record: Mapping[str, Any]) -> float:
    """Wall seconds of a record's run: ``timings["total"]``, or an older record's ``time``.

    >>> record_seconds({"timings": {"total": 1.5}}), record_seconds({"time": 2.0})
    (1.5, 2.0)
    """
    timings = record.get("timings")
    if isinstance(timings, Mapping) and "total" in timings:
        return float(timings["total"])
    return float(record.get("time", record.get("total_time", float("nan"))))


def load_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All well-formed records of a JSONL file.

    Damaged lines (a line cut short by a crash, bad UTF-8, missing or wrong-typed fields)
    are left out; :func:`bmfdsl.apps.experiments._records.read_records` says which they are.
    """
    return read_records(path).records


def append_record(path: str | os.PathLike[str], record: Mapping[str, Any]) -> None:
    """Append one record as a line and push it to disk before returning (no symlinks)."""
    append_line(path, json.dumps(record, sort_keys=True).encode("utf-8") + b"\n")


# --------------------------------------------------------------------------------------
# Progress bar
# --------------------------------------------------------------------------------------


def _task_size(task: RunTask) -> float:
    """Entries of the task's matrix (a proxy for its cost before any run is timed)."""
    params = task.instance.params
    m = float(params.get("m", task.instance.paper_m) or 1)
    n = float(params.get("n", 30) or 30)
    return m * n * task.rank


class CostModel:
    """Seconds a run will take, learnt from the runs timed so far.

    Runs are grouped by (method, instance group, rank): a group's estimate is the mean of its
    timed runs; an untimed group is scaled from the timed runs of the same method by matrix
    size (or of any method, before that method was timed). Per-cell costs differ by four
    orders of magnitude between m = 30 and m = 50,000, so a runs-per-second rate misleads.

    >>> tasks = plan_runs(get_experiment("table2"), sizes=[30, 2000], ranks=[1], trials=1,
    ...                   methods=["baseline"])
    >>> model = CostModel()
    >>> model.observe(tasks[0], 0.01)
    >>> round(model.estimate(tasks[1]) / model.estimate(tasks[0]))  # 2000 rows cost more
    67
    """

    def __init__(self) -> None:
        self._group: dict[tuple[str, str, int], list[float]] = {}
        self._per_size: dict[str, list[float]] = {}

    @staticmethod
    def _key(task: RunTask) -> tuple[str, str, int]:
        return (task.method, task.instance.group, task.rank)

    def observe(self, task: RunTask, seconds: float) -> None:
        """Record that ``task`` took ``seconds``."""
        self._group.setdefault(self._key(task), []).append(seconds)
        self._per_size.setdefault(task.method, []).append(seconds / _task_size(task))

    def estimate(self, task: RunTask) -> float | None:
        """Expected seconds of ``task``; ``None`` before any run was timed."""
        timed = self._group.get(self._key(task))
        if timed:
            return sum(timed) / len(timed)
        rates = self._per_size.get(task.method) or [r for v in self._per_size.values() for r in v]
        if not rates:
            return None
        return sum(rates) / len(rates) * _task_size(task)


class _RunProgress:
    """A tqdm bar over runs on stderr, with the time left estimated from per-cell costs."""

    def __init__(self, tasks: Sequence[RunTask], todo: Sequence[RunTask], label: str) -> None:
        from tqdm.auto import tqdm

        self._remaining = {task.run_id: task for task in todo}
        self._costs = CostModel()
        self._started = time.monotonic()
        self._busy = 0.0  # run-seconds finished in this call (over all workers)
        self._bar = tqdm(
            total=len(tasks),
            initial=len(tasks) - len(todo),
            desc=label,
            unit="run",
            file=sys.stderr,
            dynamic_ncols=True,
            disable=None,  # off when stderr is not a terminal
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} runs "
            "[{elapsed} elapsed{postfix}]",
        )

    def finished(self, task: RunTask | None, seconds: float | None) -> None:
        """One run finished (``seconds`` from its record when it has them)."""
        if task is not None:
            self._remaining.pop(task.run_id, None)
            if seconds is not None:
                self._costs.observe(task, seconds)
                self._busy += seconds
        self._bar.set_postfix_str(self._left(), refresh=False)
        self._bar.update(1)

    def _left(self) -> str:
        estimates = [self._costs.estimate(task) for task in self._remaining.values()]
        if not self._remaining:
            return ", done"
        if any(estimate is None for estimate in estimates) or self._busy <= 0:
            return ", time left: ?"
        wall = time.monotonic() - self._started
        parallel = max(self._busy / wall, 1e-9) if wall > 0 else 1.0  # workers kept busy
        seconds = sum(e for e in estimates if e is not None) / parallel
        return f", about {_clock(seconds)} left"

    def close(self) -> None:
        self._bar.close()


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------


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
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as exc:
        raise BackendUnavailableError(
            "parallel runs need Dask: pip install 'bmfdsl[dask]' (or run with --workers 1)"
        ) from exc
    cluster = None
    if scheduler is None:
        import dask

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
) -> list[dict[str, Any]]:
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
            workers need bmfdsl installed and the data folder at the same path.
        data_dir: folder with ``mnist/``, ``leukemia/``, ``melanoma/``; default
            ``$BMFDSL_DATA_DIR``.
        seed: base seed of all runs.
        method_table: extra or replacement methods by name.
        progress: draw a progress bar on stderr.
        command: the command line to record with the results (default ``sys.argv``).

    Returns:
        The successful records of the planned runs, old and new.
    """
    experiment = get_experiment(name)
    resolved = resolve_methods(methods, method_table, defaults=experiment.default_methods)
    if data_dir is None and os.environ.get("BMFDSL_DATA_DIR"):
        data_dir = os.environ["BMFDSL_DATA_DIR"]
    data_text = None if data_dir is None else str(Path(data_dir).resolve())
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
) -> list[dict[str, Any]]:
    path = results_path(out, name)
    stored = read_records(path)
    if stored.skipped:
        print(stored.skipped_summary(path), file=sys.stderr)
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
    bar = _RunProgress(tasks, todo, name) if progress else None
    by_id = {task.run_id: task for task in todo}
    failures = 0
    serial = scheduler is None and (workers or os.cpu_count() or 1) == 1
    if serial or len(todo) <= 1:
        stream = _run_serial(todo, resolved)
    else:
        count = min(workers or os.cpu_count() or 1, len(todo))
        stream = _run_dask(todo, resolved, workers=count, scheduler=scheduler)
    try:
        for record in stream:
            append_record(path, record)
            if record["status"] == "ok":
                finished[record["run_id"]] = record
            else:
                failures += 1
                print(f"\n{record['run_id']} failed: {record['message']}", file=sys.stderr)
            if bar is not None:
                seconds = record.get("time")
                bar.finished(by_id.get(record["run_id"]), seconds)
    except KeyboardInterrupt:
        # one line, printed by whoever catches it (the CLI): no partial state is lost
        raise KeyboardInterrupt(
            f"{len(finished)} finished runs are saved in {path}; "
            "run the same command again to finish the rest"
        ) from None
    finally:
        stream.close()  # shuts a local Dask cluster down now, also on interruption
        if bar is not None:
            bar.close()
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
    return [finished[t.run_id] for t in tasks if t.run_id in finished]

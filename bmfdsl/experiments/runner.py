"""Run the paper's experiments: seeded runs, appended to JSONL as each finishes, resumable.

Every run (instance, method, rank, trial) has a stable id and a seed derived from it, so a
run gives the same result serially, on local Dask processes or on a distributed cluster.
Results go to ``OUT/<experiment>.jsonl``, one JSON object per line, written and flushed as
soon as a run finishes; re-running the same command skips the runs already in the file.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import numpy as np

from bmfdsl.errors import BackendUnavailableError, InvalidParameterError, UnknownNameError
from bmfdsl.experiments.clustering import adjusted_rand_index, clusters_from_factor
from bmfdsl.experiments.tables import (
    DEFAULT_METHODS,
    Experiment,
    Instance,
    MethodSettings,
    get_experiment,
    method_settings,
    stable_seed,
)
from bmfdsl.result import Factorization, to_jsonable

__all__ = [
    "Method",
    "Progress",
    "RunTask",
    "append_record",
    "build_matrix",
    "execute_run",
    "load_records",
    "plan_runs",
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
    from bmfdsl import factorize

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
    try:
        from bmfdsl.backends.registry import list_backends, normalize_name
    except ImportError:  # no registry in this installation: runs will report it
        return
    infos = {info.name: info for info in list_backends()}
    info = infos.get(normalize_name(name))
    if info is None:
        raise UnknownNameError("backend", name, infos, hint="use it as qubo:<backend>")
    if not info.available:
        raise BackendUnavailableError(f"backend {info.name!r} is unavailable: {info.reason}")


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
    from bmfdsl.datasets import load_mnist

    return load_mnist(data_dir, per_digit=per_digit)


@functools.lru_cache(maxsize=4)
def _gene(name: str, data_dir: str | None) -> Any:
    from bmfdsl import datasets

    loader = datasets.load_leukemia if name == "leukemia" else datasets.load_melanoma
    return loader(data_dir)


def build_matrix(
    experiment: Experiment, task: RunTask
) -> tuple[np.ndarray, dict[str, tuple[str, ...]]]:
    """The run's data matrix and, for gene data, the known sample classes."""
    from bmfdsl.datasets import make_bernoulli, make_exact_rank

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
        record.update(
            status="failed",
            message=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(limit=-4),
        )
        return record
    info = result.info or {}
    record.update(
        status="ok",
        error=int(result.error),
        relative_error=float(result.relative_error),
        time=elapsed,
        total_time=to_jsonable(info.get("total_time", elapsed)),
        timings=to_jsonable(info.get("timings", {})),
        backend=to_jsonable(info.get("backend")),
        broken_constraints=to_jsonable(dict(result.broken_constraints)),
        # proven by the result's lower bound (bmfdsl.bounds), whichever method produced it
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


def load_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All complete records of a JSONL file (a line cut short by a crash is ignored)."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    with path.open(encoding="utf-8") as stream:
        for line in stream:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and "run_id" in record:
                records.append(record)
    return records


def append_record(path: str | os.PathLike[str], record: Mapping[str, Any]) -> None:
    """Append one record as a line and push it to disk before returning."""
    path = Path(path)
    line = json.dumps(record, sort_keys=True)
    with path.open("a+b") as stream:
        stream.seek(0, os.SEEK_END)
        if stream.tell() > 0:  # a crash may have left a line without its newline
            stream.seek(-1, os.SEEK_END)
            if stream.read(1) != b"\n":
                stream.write(b"\n")
        stream.write(line.encode("utf-8") + b"\n")
        stream.flush()
        os.fsync(stream.fileno())


# --------------------------------------------------------------------------------------
# Progress bar
# --------------------------------------------------------------------------------------


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """A one-line progress bar on stderr: runs done / total, elapsed and time left.

    >>> import io
    >>> stream = io.StringIO()
    >>> bar = Progress(4, done=1, label="t", stream=stream)
    >>> bar.advance(); bar.close()
    >>> "2/4 runs" in stream.getvalue()
    True
    """

    width = 24

    def __init__(
        self, total: int, *, done: int = 0, label: str = "", stream: IO[str] | None = None
    ) -> None:
        self.total = total
        self.done = done
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self._start_done = done
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._drawn_done = -1
        self._interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self._draw(force=True)

    def advance(self, count: int = 1) -> None:
        """Count ``count`` more finished runs."""
        self.done += count
        self._draw(force=self.done >= self.total)

    def _draw(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.done == self._drawn_done and self._drawn_done >= 0:
            return
        if not force and now - self._last_draw < (0.2 if self._interactive else 5.0):
            return
        self._drawn_done = self.done
        self._last_draw = now
        elapsed = now - self._start
        new = self.done - self._start_done
        remaining = self.total - self.done
        if remaining == 0:
            left = _clock(0)
        else:
            left = _clock(elapsed / new * remaining) if new > 0 else "?"
        filled = int(self.width * self.done / self.total) if self.total else self.width
        bar = "#" * filled + "-" * (self.width - filled)
        text = (
            f"{self.label} [{bar}] {self.done}/{self.total} runs, "
            f"{_clock(elapsed)} elapsed, {left} left"
        )
        self.stream.write(("\r" + text) if self._interactive else text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line."""
        self._draw(force=True)
        if self._interactive:
            self.stream.write("\n")
            self.stream.flush()


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
    path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _run_serial(
    tasks: Iterable[RunTask], methods: Mapping[str, Method]
) -> Generator[dict[str, Any], None, None]:
    for task in tasks:
        yield execute_run(task, methods[task.method])


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
        }
        with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
            cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
        client = Client(cluster)
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
        client.close()
        if cluster is not None:
            cluster.close()


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
    path = results_path(out, name)
    finished = {r["run_id"]: r for r in load_records(path) if r.get("status") == "ok"}
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
    bar = Progress(len(tasks), done=len(tasks) - len(todo), label=name) if progress else None
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
                bar.advance()
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: {len(finished)} finished runs are saved in {path}; "
            "run the same command again to finish the rest",
            file=sys.stderr,
        )
        raise
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

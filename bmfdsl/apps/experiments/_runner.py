"""The paper's experiments, one run at a time: methods, planned runs, their data and records.

Every run (instance, method, rank, trial) has a stable id and a seed derived from it, so a
run gives the same result serially, on local Dask processes or on a distributed cluster.
Results go to ``OUT/<experiment>.jsonl``, one JSON object per line, written and flushed as
soon as a run finishes; re-running the same command skips the runs already in the file.
:mod:`bmfdsl.apps.experiments._scheduling` runs a whole experiment (serially or on Dask).
"""

from __future__ import annotations

import functools
import json
import os
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bmfdsl.apps._clusters import clusters_from_factor
from bmfdsl.apps.experiments._clustering import adjusted_rand_index
from bmfdsl.apps.experiments._records import append_line, read_records
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
from bmfdsl.errors import InvalidParameterError, UnknownNameError
from bmfdsl.result import Factorization, to_jsonable

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
    from bmfdsl.apps._datafiles import load_mnist

    return load_mnist(data_dir, per_digit=per_digit)


@functools.lru_cache(maxsize=4)
def _gene(name: str, data_dir: str | None) -> Any:
    from bmfdsl.apps._datafiles import load_leukemia, load_melanoma

    loader = load_leukemia if name == "leukemia" else load_melanoma
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

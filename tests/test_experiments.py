"""Tests of the experiment runner, report, figures and CLI (small settings, fake methods)."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from bmfdsl.apps import clusters_from_factor
from bmfdsl.apps.experiments import _cli as cli
from bmfdsl.apps.experiments import run_experiment
from bmfdsl.apps.experiments._clustering import adjusted_rand_index
from bmfdsl.apps.experiments._report import load_paper_tables, render_report
from bmfdsl.apps.experiments._runner import (
    build_matrix,
    load_records,
    plan_runs,
    resolve_methods,
    results_path,
)
from bmfdsl.apps.experiments._tables import DEFAULT_METHODS, EXPERIMENTS, get_experiment
from bmfdsl.errors import InvalidParameterError, UnknownNameError
from bmfdsl.linalg import relative_error, squared_error
from bmfdsl.result import Factorization

# ---------------------------------------------------------------- fake methods and data

CALLS: list[tuple[int, int]] = []


def random_method(A, rank, settings):
    """Random factors from the run's seed: any change of seed or data changes the result."""
    CALLS.append((A.shape[0], rank))
    rng = np.random.default_rng(settings.random_state)
    U = (rng.random((A.shape[0], rank)) < 0.3).astype(np.int8)
    V = np.zeros((A.shape[1], rank), dtype=np.int8)
    V[np.arange(A.shape[1]), rng.integers(rank, size=A.shape[1])] = 1  # one-hot rows
    error = squared_error(A, U, V)
    return Factorization(U, V, error, relative_error(error, A), info={"timings": {"fake": 0.0}})


def zero_method(A, rank, settings):
    """U = V = 0: relative error exactly 1 on any nonzero A."""
    U = np.zeros((A.shape[0], rank), dtype=np.int8)
    V = np.zeros((A.shape[1], rank), dtype=np.int8)
    error = squared_error(A, U, V)
    return Factorization(U, V, error, relative_error(error, A), info={"settings": settings})


FAKE = {"fake": random_method, "zero": zero_method}


def _idx(array):
    return bytes([0, 0, 8, array.ndim]) + np.array(array.shape, ">u4").tobytes() + array.tobytes()


def write_fake_data(root: Path) -> Path:
    """A data folder with the layout of the real one, small enough for fast tests."""
    rng = np.random.default_rng(0)
    mnist = root / "mnist"
    mnist.mkdir(parents=True)
    labels = np.tile(np.arange(10, dtype=np.uint8), 2)
    images = rng.integers(0, 256, size=(20, 28, 28)).astype(np.uint8)
    (mnist / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(images)))
    (mnist / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(labels)))
    leukemia = root / "leukemia"
    leukemia.mkdir()
    values = rng.choice([20, 300, 3000], size=(30, 6), p=[0.4, 0.3, 0.3])
    rows = ["\t".join(str(v) for v in row) for row in values]
    (leukemia / "ALL_AML_data.txt").write_text("\r\n".join(rows) + "\r\n")
    genes = ["Name\tDescription"] + [f"G{i}\tx" for i in range(30)]
    (leukemia / "ALL_AML_genes.txt").write_text("\r\n".join(genes) + "\r\n")
    samples = ["ALL_1_B-cell", "ALL_2_T-cell", "ALL_3_B-cell", "AML_1", "AML_2", "AML_3"]
    (leukemia / "ALL_AML_samples.txt").write_bytes(("\r\n".join(samples)).encode() + b"\0" * 9)
    melanoma = root / "melanoma"
    melanoma.mkdir()
    names = ["TC-F027", "UACC-2873", "M93-47", "NilC", "SRS3", "RMS13"]
    lines = ["\t" + "\t".join(f'"{s}"' for s in names), "\t" + "\t".join(['"ML1"', '"ML2"'] * 3)]
    lines += [f"{i}\t" + "\t".join(f"{v:.2f}" for v in rng.normal(size=6)) for i in range(30)]
    (melanoma / "bittner-2000_database.txt").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def data_dir(tmp_path):
    return write_fake_data(tmp_path / "data")


SMALL = {"ranks": [1, 2], "trials": 2, "progress": False, "workers": 1}


def _factorize_available() -> bool:
    """True when bmfdsl.factorize exists and its default solver runs here."""
    try:
        from bmfdsl import factorize

        factorize(np.eye(2, dtype=int), 1, random_state=0)
    except (ImportError, AttributeError):
        return False
    return True


# ---------------------------------------------------------------- ARI


def _ari_by_pair_counting(a, b):
    """Hubert-Arabie ARI from the four pair counts, over all pairs (independent formula)."""
    same_same = same_diff = diff_same = diff_diff = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        in_a, in_b = a[i] == a[j], b[i] == b[j]
        same_same += in_a and in_b
        same_diff += in_a and not in_b
        diff_same += in_b and not in_a
        diff_diff += not in_a and not in_b
    numerator = 2 * (same_same * diff_diff - same_diff * diff_same)
    denominator = (same_same + same_diff) * (same_diff + diff_diff) + (same_same + diff_same) * (
        diff_same + diff_diff
    )
    return numerator / denominator


def test_adjusted_rand_index_equals_pair_counting_formula():
    rng = np.random.default_rng(2)
    for _ in range(30):
        n = int(rng.integers(4, 25))
        a = rng.integers(0, rng.integers(2, 5), size=n)
        b = rng.integers(0, rng.integers(2, 5), size=n)
        if len(set(a)) == 1 and len(set(b)) == 1:
            continue
        assert adjusted_rand_index(a, b) == pytest.approx(_ari_by_pair_counting(a, b))
    labels = ["ALL", "ALL", "AML", "AML", "AML"]
    assert adjusted_rand_index(labels, ["x", "x", "y", "y", "y"]) == 1.0
    assert adjusted_rand_index(labels, clusters_from_factor([[1, 0]] * 2 + [[0, 1]] * 3)) == 1.0
    with pytest.raises(InvalidParameterError):
        adjusted_rand_index([1, 2], [1])


# ---------------------------------------------------------------- tables and planning


def test_every_experiment_block_has_the_papers_values():
    paper = load_paper_tables()
    assert len(paper) == 375  # 15 blocks x 5 methods x 5 ranks
    for experiment in EXPERIMENTS.values():
        for instance in experiment.instances():
            for method in ("DA", "DA+ALS", "Penalized", "Thresholded", "Baseline"):
                assert (experiment.number, instance.group, method, 5) in paper


def test_paper_settings_trials_sampling_and_one_hot():
    assert [i.key for i in get_experiment("table1").instances()] == ["m=30", "m=2000", "m=50000"]
    assert len(get_experiment("table5").instances()) == 100
    tasks = plan_runs(get_experiment("table2"), methods=["baseline"])
    assert len(tasks) == 3 * 5 * 10  # sizes x ranks x trials
    assert len({t.run_id for t in tasks}) == len(tasks) and len({t.seed for t in tasks}) == len(
        tasks
    )
    # every method sees the same matrix; table 1 plants the target rank, so its data seed
    # changes with the rank, the Bernoulli tables' does not
    pair = plan_runs(
        get_experiment("table3"), sizes=[30], ranks=[1, 2], trials=1, methods=["a", "b"]
    )
    assert len({t.data_seed for t in pair}) == 1
    planted = plan_runs(get_experiment("table1"), sizes=[30], ranks=[1, 2], trials=1, methods=["a"])
    assert planted[0].data_seed != planted[1].data_seed
    with pytest.raises(UnknownNameError, match="table7"):
        get_experiment("table7")
    with pytest.raises(UnknownNameError, match="qubo:<backend>"):
        resolve_methods(["nonsense"])
    with pytest.raises(InvalidParameterError, match="row counts"):
        plan_runs(get_experiment("table1"), sizes=["abc"], methods=["a"])
    # Table 6 also runs ours without the one-hot constraint (see tables.py for why)
    assert get_experiment("table6").default_methods == (
        "bmfdsl", "bmfdsl-no-onehot", "penalized", "thresholded", "baseline"
    )  # fmt: skip
    assert get_experiment("table2").default_methods == DEFAULT_METHODS
    assert list(resolve_methods(None, defaults=get_experiment("table6").default_methods)) == list(
        get_experiment("table6").default_methods
    )


@pytest.mark.parametrize("name", ["table1", "table2", "table3", "table4"])
def test_synthetic_tables_end_to_end(tmp_path, name):
    records = run_experiment(
        name, tmp_path, sizes=[30], methods=["fake"], method_table=FAKE, **SMALL
    )
    assert len(records) == 4 and all(r["status"] == "ok" for r in records)
    experiment = get_experiment(name)
    for record in records:
        task = next(
            t
            for t in plan_runs(experiment, sizes=[30], ranks=[1, 2], trials=2, methods=["fake"])
            if t.run_id == record["run_id"]
        )
        A, _ = build_matrix(experiment, task)
        assert A.shape == (30, 30)
        assert record["relative_error"] == pytest.approx(record["error"] / A.sum())
        assert (
            record["relative_error"]
            == random_method(A, record["rank"], _settings(record)).relative_error
        )
    if name == "table1":
        assert all(r["dataset"] == "exact" for r in records)
    else:
        assert records[0]["params"]["p"] == experiment.p


def _settings(record):
    from bmfdsl.apps.experiments._tables import MethodSettings

    return MethodSettings(**record["settings"])


def test_tall_matrices_are_sampled_for_the_qubo_pipeline_only(tmp_path):
    methods = {"baseline": zero_method, "penalized": zero_method, "qubo:x+als": zero_method}
    records = run_experiment(
        "table2",
        tmp_path,
        sizes=[2000],
        methods=list(methods),
        method_table=methods,
        ranks=[1],
        trials=1,
        progress=False,
        workers=1,
    )
    rows = {r["method"]: r["settings"]["sample_rows"] for r in records}
    assert rows == {"baseline": None, "penalized": None, "qubo:x+als": 30}
    assert all(r["relative_error"] == 1.0 for r in records)


def test_table5_mnist_end_to_end(tmp_path, data_dir):
    records = run_experiment(
        "table5",
        tmp_path,
        sizes=[1],
        methods=["fake"],
        method_table=FAKE,
        data_dir=data_dir,
        **SMALL,
    )
    assert len(records) == 10 * 2 * 2  # 10 digits x 2 ranks x 2 trials
    assert {r["m"] for r in records} == {28} and {r["group"] for r in records} == {"mnist"}
    assert {r["params"]["digit"] for r in records} == set(range(10))


def test_table6_gene_data_end_to_end_with_one_hot_and_ari(tmp_path, data_dir):
    methods = {"bmfdsl": random_method, "bmfdsl-no-onehot": random_method}
    records = run_experiment(
        "table6", tmp_path, methods=list(methods), method_table=methods, data_dir=data_dir, **SMALL
    )
    assert len(records) == 2 * 2 * 2 * 2
    from bmfdsl.apps import load_leukemia

    leukemia = load_leukemia(data_dir)
    for record in records:
        expected = "V" if record["method"] == "bmfdsl" else None
        assert record["settings"]["one_hot"] == expected
        if record["dataset"] == "leukemia":
            assert record["m"] == leukemia.matrix.shape[0]
            result = random_method(leukemia.matrix, record["rank"], _settings(record))
            clusters = clusters_from_factor(result.V)
            expected_ari = _ari_by_pair_counting(leukemia.labels, clusters)
            assert record["ari"]["ALL/AML"] == pytest.approx(expected_ari)
        else:
            assert set(record["ari"]) == {"melanoma/control", "ML1/ML2"}
    report = render_report(tmp_path)
    assert "Adjusted Rand index" in report and "ALL-B/ALL-T/AML" in report


# ---------------------------------------------------------------- resume and interruption


def test_rerun_skips_finished_runs_and_completes_new_ones(tmp_path):
    CALLS.clear()
    first = run_experiment(
        "table3", tmp_path, sizes=[30], methods=["fake"], method_table=FAKE, **SMALL
    )
    assert len(CALLS) == 4
    again = run_experiment(
        "table3", tmp_path, sizes=[30], methods=["fake"], method_table=FAKE, **SMALL
    )
    assert len(CALLS) == 4  # nothing re-run
    assert again == first
    more = {**SMALL, "trials": 3}
    extended = run_experiment(
        "table3", tmp_path, sizes=[30], methods=["fake"], method_table=FAKE, **more
    )
    assert len(CALLS) == 6 and len(extended) == 6
    lines = results_path(tmp_path, "table3").read_text().splitlines()
    assert len(lines) == 6 and len({json.loads(line)["run_id"] for line in lines}) == 6
    meta = json.loads((tmp_path / "table3.meta.json").read_text())
    assert meta["runs_this_call"] == 2 and meta["wall_seconds"] >= 0


def test_interruption_loses_no_finished_run(tmp_path):
    calls = {"count": 0}

    def interrupted_on_third_call(A, rank, settings):
        calls["count"] += 1
        if calls["count"] == 3:
            raise KeyboardInterrupt
        return random_method(A, rank, settings)

    table = {"fake": interrupted_on_third_call}
    with pytest.raises(KeyboardInterrupt):
        run_experiment(
            "table2", tmp_path, sizes=[30], methods=["fake"], method_table=table, **SMALL
        )
    path = results_path(tmp_path, "table2")
    assert len(load_records(path)) == 2
    with path.open("a") as stream:  # a crash in the middle of writing a line
        stream.write('{"run_id": "table2|m=30|fake|r=2|t=1|s=0", "sta')
    finished = run_experiment(
        "table2", tmp_path, sizes=[30], methods=["fake"], method_table=FAKE, **SMALL
    )
    assert len(finished) == 4
    assert len(load_records(path)) == 4  # the torn line is ignored, the rest intact
    uninterrupted = run_experiment(
        "table2", tmp_path / "clean", sizes=[30], methods=["fake"], method_table=FAKE, **SMALL
    )
    assert [r["error"] for r in finished] == [r["error"] for r in uninterrupted]


def test_failed_runs_are_recorded_and_retried(tmp_path):
    def broken(A, rank, settings):
        raise RuntimeError("solver exploded")

    records = run_experiment(
        "table4", tmp_path, sizes=[30], methods=["fake"], method_table={"fake": broken}, **SMALL
    )
    assert records == []
    stored = load_records(results_path(tmp_path, "table4"))
    assert len(stored) == 4 and all("solver exploded" in r["message"] for r in stored)
    records = run_experiment(
        "table4", tmp_path, sizes=[30], methods=["fake"], method_table=FAKE, **SMALL
    )
    assert len(records) == 4
    assert "4 ok, 0 failed" in render_report(tmp_path)


# ---------------------------------------------------------------- Dask


def test_dask_local_processes_give_the_same_results_as_serial(tmp_path):
    """Real methods on worker processes (importable by the workers, unlike this test module)."""
    pytest.importorskip("dask.distributed")
    kwargs = {
        "sizes": [30],
        "methods": ["baseline", "thresholded"],
        "ranks": [1, 2],
        "trials": 2,
        "progress": False,
    }
    serial = run_experiment("table3", tmp_path / "serial", workers=1, **kwargs)
    parallel = run_experiment("table3", tmp_path / "dask", workers=2, **kwargs)
    strip = lambda r: {k: v for k, v in r.items() if k not in ("time", "total_time", "timings")}  # noqa: E731
    assert len(serial) == 8
    assert [strip(r) for r in serial] == [strip(r) for r in parallel]


def test_a_scheduler_address_runs_on_that_cluster(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    kwargs = {"sizes": [30], "methods": ["fake"], "method_table": FAKE, "ranks": [1, 2]}
    serial = run_experiment("table4", tmp_path / "serial", workers=1, progress=False, **kwargs)
    free_port = {"dashboard_address": "127.0.0.1:0"}  # not 8787: another run may hold it
    with distributed.LocalCluster(
        n_workers=1, processes=False, dashboard_address=None, scheduler_kwargs=free_port
    ) as cluster:
        remote = run_experiment(
            "table4",
            tmp_path / "cluster",
            scheduler=cluster.scheduler_address,
            progress=False,
            **kwargs,
        )
    assert len(remote) == 2 * 10
    assert [r["error"] for r in serial] == [r["error"] for r in remote]


# ---------------------------------------------------------------- report


def test_report_puts_the_papers_values_beside_ours(tmp_path):
    methods = {"baseline": zero_method, "fake": random_method}
    run_experiment(
        "table1", tmp_path, sizes=[30], methods=list(methods), method_table=methods, **SMALL
    )
    report = render_report(tmp_path)
    # U = V = 0 gives relative error 1 exactly; the paper's Baseline is 0.8265 at r = 1 and
    # 0.8706 at r = 2 (Table 1, m = 30), so the differences are +0.1735 and +0.1294.
    unbolded = report.replace("**", "")
    assert "1.0000 ± 0.0000 / 0.8265 (+0.1735)" in unbolded
    assert "1.0000 ± 0.0000 / 0.8706 (+0.1294)" in unbolded
    assert "| Baseline (paper) | | 0.8265 | 0.8706 | |" in report
    assert "| DA+ALS (paper) | | _0.0000_ | _0.0000_ | |" in report
    fake_rows = [line for line in report.splitlines() if line.startswith("| fake")]
    zero_rows = [line for line in report.splitlines() if line.startswith("| baseline")]
    records = load_records(results_path(tmp_path, "table1"))
    fake_mean = np.mean(
        [r["relative_error"] for r in records if r["method"] == "fake" and r["rank"] == 1]
    )
    assert f"{fake_mean:.4f}" in fake_rows[0]
    best_is_fake = fake_mean < 1.0
    assert ("**" in fake_rows[0].split("|")[3]) == best_is_fake
    assert ("**" in zero_rows[0].split("|")[3]) == (not best_is_fake)
    assert "Command:" in report and "numpy" in report


def test_report_compares_on_the_same_instances(tmp_path):
    # "bmfdsl" here returns U = V = 0 (relative error 1) and "baseline" random factors
    methods = {"bmfdsl": zero_method, "baseline": random_method}
    run_experiment(
        "table1", tmp_path, sizes=[30], methods=list(methods), method_table=methods, **SMALL
    )
    report = render_report(tmp_path)
    records = load_records(results_path(tmp_path, "table1"))
    baseline_runs = [r for r in records if r["method"] == "baseline"]
    means = {
        rank: np.mean([r["relative_error"] for r in baseline_runs if r["rank"] == rank])
        for rank in (1, 2)
    }
    wins = sum(mean >= 1.0 for mean in means.values())
    assert f"bmfdsl at or below every non-bmfdsl method run here in {wins}/2 columns" in report
    # the paper's DA+ALS - Baseline at m = 30: 0 - 0.8265 (r = 1) and 0 - 0.8706 (r = 2)
    assert f"r = 1: {1 - means[1]:+.4f} vs -0.8265" in report
    assert f"r = 2: {1 - means[2]:+.4f} vs -0.8706" in report


def test_report_counts_the_runs_proven_optimal(tmp_path):
    def proving_method(A, rank, settings):
        result = zero_method(A, rank, settings)
        result.lower_bound = result.error if rank == 1 else result.error // 2
        return result

    methods = {"bmfdsl": proving_method, "baseline": zero_method}
    run_experiment(
        "table1", tmp_path, sizes=[30], methods=list(methods), method_table=methods, **SMALL
    )
    report = render_report(tmp_path)
    # two trials per cell; only the rank-1 runs have a proof, the baseline has no bound at all
    records = load_records(results_path(tmp_path, "table1"))
    assert {r["certified_optimal"] for r in records if r["method"] == "bmfdsl"} == {True, False}
    assert all(0 <= r["lower_bound"] <= r["error"] for r in records)
    gaps = [r["gap"] for r in records if r["method"] == "bmfdsl" and r["rank"] == 2]
    gap = 100 * float(np.mean(gaps))
    assert gap > 0
    prefix = "Proven optimal (mean proven gap),"
    assert f"{prefix} bmfdsl runs: r = 1: 2/2 (gap 0.0%); r = 2: 0/2 (gap {gap:.1f}%)." in report
    assert f"{prefix} baseline runs: r = 1: 0/2 (gap 100.0%); r = 2: 0/2 (gap 100.0%)." in report


# ---------------------------------------------------------------- CLI and figures


def test_cli_report_and_errors(tmp_path, capsys):
    run_experiment("table2", tmp_path, sizes=[30], methods=["fake"], method_table=FAKE, **SMALL)
    assert cli.main(["report", str(tmp_path)]) == 0
    assert "Table 2" in (tmp_path / "report.md").read_text()
    assert cli.main(["report", str(tmp_path), "-o", "-"]) == 0
    assert "0.9209" in capsys.readouterr().out  # paper's DA at m = 30, r = 1
    assert cli.main(["experiment", "table1", "--sizes", "x", "--out", str(tmp_path)]) == 1
    assert "row counts" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["experiment", "table9", "--out", str(tmp_path)])


@pytest.mark.skipif(
    not _factorize_available(), reason="bmfdsl.factorize or its default solver is not available"
)
def test_cli_experiment_with_the_default_methods(tmp_path):
    out = tmp_path / "out"
    args = ["experiment", "table1", "--sizes", "30", "--ranks", "1", "2", "--trials", "1"]
    assert cli.main([*args, "--workers", "1", "--no-progress", "--out", str(out)]) == 0
    records = load_records(out / "table1.jsonl")
    assert {r["method"] for r in records} == {"bmfdsl", "penalized", "thresholded", "baseline"}
    assert all(r["status"] == "ok" and r["relative_error"] >= 0 for r in records)
    # planted exact rank: bmfdsl reaches 0 and says it is optimal; every method's claim is
    # backed by its proven lower bound
    ours = [r for r in records if r["method"] == "bmfdsl"]
    assert all(r["error"] == 0 and r["certified_optimal"] is True for r in ours)
    for record in records:
        assert 0 <= record["lower_bound"] <= record["error"]
        assert record["certified_optimal"] is (record["error"] == record["lower_bound"])
    report = (out / "report.md").read_text()
    assert "bmfdsl runs: r = 1: 1/1 (gap 0.0%); r = 2: 1/1 (gap 0.0%)." in report


def test_figures(tmp_path, data_dir):
    pytest.importorskip("matplotlib")
    from bmfdsl.apps.experiments._figures import make_figures

    run_experiment("table1", tmp_path, sizes=[30], methods=["fake"], method_table=FAKE, **SMALL)
    paths = make_figures(tmp_path, data_dir=data_dir, method=random_method, formats=["png", "svg"])
    names = sorted(p.name for p in paths)
    assert names == sorted(
        f"{stem}.{ext}"
        for stem in ("table1_error_vs_rank", "fig1_mnist", "fig2_leukemia")
        for ext in ("png", "svg")
    )
    assert all(p.stat().st_size > 1000 for p in paths)
    assert (tmp_path / "figures" / "fig1_mnist.png").read_bytes()[:4] == b"\x89PNG"


def test_unknown_backend_fails_before_any_run(tmp_path):
    pytest.importorskip("bmfdsl.solvers._registry")
    with pytest.raises(UnknownNameError, match="no-such-solver"):
        run_experiment("table1", tmp_path, methods=["qubo:no-such-solver+als"], progress=False)
    assert not results_path(tmp_path, "table1").exists()


def test_report_times_come_from_timings_and_old_records_still_read():
    from bmfdsl.apps.experiments._report import summarize

    base = {"status": "ok", "table": 1, "group": "m=30", "method": "x", "rank": 2}
    new = {**base, "relative_error": 0.5, "timings": {"solve": 1.0, "total": 3.0}}
    old = {**base, "relative_error": 0.25, "time": 1.0, "total_time": 0.9}
    entry = summarize([new, old])[(1, "m=30", "x", 2)]
    assert entry["time"] == pytest.approx(2.0) and entry["mean"] == pytest.approx(0.375)


def test_records_carry_time_only_as_timings(tmp_path):
    run_experiment(
        "table1", tmp_path, methods=["baseline"], ranks=[1], trials=1, sizes=[30], progress=False
    )
    records = load_records(results_path(tmp_path, "table1"))
    assert records and all(r["status"] == "ok" for r in records)
    for record in records:
        assert record["timings"]["total"] >= 0 and not {"time", "total_time"} & set(record)

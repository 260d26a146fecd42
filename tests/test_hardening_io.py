"""Issue 24, the input, file, command-line and experiment half: one regression test per item.

Crafted sparse inputs run in a subprocess where a regression would crash the interpreter
(a segfault then fails the test instead of killing pytest).
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

from bmfdsl.apps import BinaryMatrixFactorization, main, read_data
from bmfdsl.apps._io import MatrixData, write_text_atomic
from bmfdsl.apps.experiments._records import read_records
from bmfdsl.apps.experiments._report import render_report
from bmfdsl.errors import InvalidMatrixError, InvalidParameterError
from bmfdsl.validation import check_sparse_structure


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# --------------------------------------------------------------------------------------
# Item 1: crafted sparse input, decompressed size
# --------------------------------------------------------------------------------------


def test_item1_crafted_csr_is_refused(tmp_path):
    """The issue's reproducers: in memory (factorize, the estimator) and as an .npz file."""
    result = run_python(
        """
        import numpy as np, scipy.sparse as sp
        from bmfdsl import factorize
        from bmfdsl.apps import BinaryMatrixFactorization, main
        from bmfdsl.errors import InvalidMatrixError
        cases = {
            "far": ([0, 100000, 5000000], [0, 1, 2, 3]),
            "negative": ([0, 1, -7], [0, 1, 2, 3]),
            "indptr": ([0, 1, 2], [0, 3, 1, 3]),
            "quiet": ([0, 5, 9], [0, 1, 2, 3]),
        }
        for name, (indices, indptr) in cases.items():
            A = sp.csr_matrix((np.ones(3), [0, 1, 2], [0, 1, 2, 3]), shape=(3, 3))
            A.indices, A.indptr = np.array(indices), np.array(indptr)
            for call in (lambda: factorize(A, 1), lambda: BinaryMatrixFactorization(1).fit(A)):
                try:
                    call()
                except InvalidMatrixError as exc:
                    assert "damaged sparse CSR" in str(exc), exc
                else:
                    raise SystemExit(f"{name} was accepted")
            np.savez(f"{name}.npz", data=np.ones(3), indices=np.array(indices),
                     indptr=np.array(indptr), shape=np.array([3, 3]), format=np.array("csr"))
            assert main(["factorize", f"{name}.npz", "-r", "1"]) == 1
        print("refused")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "refused"
    assert "bmfdsl: error:" in result.stderr and "Traceback" not in result.stderr


def test_item1_structure_check_covers_csc_coo_bsr_dia_and_lil():
    from bmfdsl import factorize

    good = scipy.sparse.random(5, 4, density=0.5, random_state=0, format="csr")
    for layout in ("csr", "csc", "coo", "bsr"):
        check_sparse_structure(good.asformat(layout))  # a well-formed matrix passes
    csc = scipy.sparse.csc_array(good)
    csc.indices = csc.indices.copy()
    csc.indices[0] = 5  # rows 0..4 only
    coo = scipy.sparse.coo_array(good)
    coo.coords = (coo.coords[0], np.where(coo.coords[1] == 0, 4, coo.coords[1]))
    bsr = scipy.sparse.bsr_array(np.eye(4), blocksize=(2, 2))
    bsr.indices = np.array([0, 7])
    for bad in (csc, coo, bsr):
        with pytest.raises(InvalidMatrixError, match="damaged sparse"):
            check_sparse_structure(bad)
    dia = scipy.sparse.dia_array((np.ones((2, 4)), [0, 1]), shape=(4, 4))
    dia.data = np.ones((1, 4))  # one row of values for two diagonals
    lil = scipy.sparse.lil_array((3, 3))
    lil[0, 0] = 1
    lil.rows[0] = [0, 1]  # two columns, one value
    for bad in (dia, lil):
        with pytest.raises(InvalidMatrixError, match="damaged sparse"):
            factorize(bad, 1)
    lil.rows[0], lil.data[0] = [7], [1.0]  # consistent lists, a column outside the shape
    with pytest.raises(InvalidMatrixError, match="indices holds 7"):
        factorize(lil, 1)
    with pytest.raises(InvalidMatrixError, match="indices holds 7"):
        BinaryMatrixFactorization(1).fit(lil)
    short = scipy.sparse.csr_matrix(good)
    short.indptr = short.indptr[:-1]
    with pytest.raises(InvalidMatrixError, match="indptr has 5 entries"):
        check_sparse_structure(short)


def test_item1_decompressed_size_is_guarded_before_reading(tmp_path, monkeypatch):
    npy = tmp_path / "claim.npy"  # a header of 10^6 x 10^6 float64 and no data
    with npy.open("wb") as stream:
        np.lib.format.write_array_header_1_0(
            stream, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)}
        )
    mtx = tmp_path / "claim.mtx"  # the 66-byte header of 10^8 x 10^8
    mtx.write_text("%%MatrixMarket matrix array real general\n100000000 100000000\n1\n")
    npz = tmp_path / "bomb.npz"
    np.savez_compressed(npz, A=np.zeros((1000, 2000), dtype=np.int8))  # 2 MB in a few KB
    for path in (npy, mtx):
        with pytest.raises(InvalidMatrixError, match=r"would expand to .* over the limit"):
            read_data(path)
    with pytest.raises(InvalidMatrixError, match="BMFDSL_MAX_READ_BYTES"):
        read_data(npz, max_bytes=10**6)
    assert read_data(npz, max_bytes=3 * 10**6).shape == (1000, 2000)  # the limit can be raised
    monkeypatch.setenv("BMFDSL_MAX_READ_BYTES", "1000")
    with pytest.raises(InvalidMatrixError, match="over the limit"):
        read_data(npz)
    with pytest.raises(InvalidParameterError, match="max_bytes"):
        read_data(npz, max_bytes=0)


FUZZ = """
import sys
import numpy as np, scipy.sparse as sp
from bmfdsl import factorize
from bmfdsl.apps import BinaryMatrixFactorization, read_data
from bmfdsl.errors import BmfdslError

rng = np.random.default_rng(24)
layouts = ("csr", "csc", "coo")
refused = {"factorize": 0, "estimator": 0, "read_data": 0}


def crafted(layout):
    m, n = (int(x) for x in rng.integers(2, 7, size=2))
    A = sp.random(m, n, density=0.6, random_state=rng, format=layout, dtype=float)
    A.data[:] = 1.0
    kind = int(rng.integers(4))
    if layout == "coo":
        row, col = A.coords[0].copy(), A.coords[1].copy()
        if kind == 0:
            row[rng.integers(row.size)] = m + int(rng.integers(0, 10**6))
        elif kind == 1:
            col[rng.integers(col.size)] = -int(rng.integers(1, 10**6))
        elif kind == 2:
            row = row[:-1]
        else:
            col[rng.integers(col.size)] = n
        A.coords = (row, col)
        return A
    minor = n if layout == "csr" else m
    indices, indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    if kind == 0:
        indices[rng.integers(indices.size)] = minor + int(rng.integers(0, 10**7))
    elif kind == 1:
        indices[rng.integers(indices.size)] = -int(rng.integers(1, 10**7))
    elif kind == 2:
        indptr[1] = indptr[-1] + 1  # more than all entries, then a decreasing step
    else:
        indptr[-1] = indices.size + int(rng.integers(1, 1000))
    A.indices, A.indptr = indices, indptr
    return A


def refuses(name, call):
    try:
        call()
    except BmfdslError:
        refused[name] += 1
    else:
        print("accepted", name, A.format, getattr(A, "indptr", None), file=sys.stderr)


for case in range(60):
    A = crafted(layouts[case % 3])
    refuses("factorize", lambda: factorize(A, 1, random_state=0))
    refuses("estimator", lambda: BinaryMatrixFactorization(1, random_state=0).fit(A))
    if A.format == "coo":
        arrays = dict(row=A.coords[0], col=A.coords[1])
    else:
        arrays = dict(indices=A.indices, indptr=A.indptr)
    np.savez("fuzz.npz", data=A.data, shape=np.array(A.shape), format=np.array(A.format),
             **arrays)
    refuses("read_data", lambda: read_data("fuzz.npz"))
print(refused)
"""


def test_item1_fuzz_invalid_sparse_structures_give_only_typed_errors(tmp_path):
    """Random structurally invalid CSR/CSC/COO: only typed errors, never a crash."""
    result = run_python(FUZZ, tmp_path)
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    refused = eval(result.stdout.strip())  # a dict printed by the child
    assert refused == {"factorize": 60, "estimator": 60, "read_data": 60}


# --------------------------------------------------------------------------------------
# Item 5: ragged CSV with quotes
# --------------------------------------------------------------------------------------


def test_item5_ragged_csv_with_quotes_is_refused_like_without(tmp_path):
    for name, text in (
        ("quoted.csv", '"1",0,1\n0,1\n1,1,1\n'),
        ("plain.csv", "1,0,1\n0,1\n1,1,1\n"),
    ):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(InvalidMatrixError, match="is ragged: non-blank line 2 has 2 fields"):
            read_data(path)
    rectangular = tmp_path / "rectangular.csv"
    rectangular.write_text('"a,b",x\n"1",0\n')  # a quoted delimiter is one field
    data = read_data(rectangular, index_col=None)
    assert data.column_labels == ["a,b", "x"] and data.values.tolist() == [[1, 0]]


# --------------------------------------------------------------------------------------
# Item 6: bmfdsl experiment exits 1 on failed runs, checks data first
# --------------------------------------------------------------------------------------


def test_item6_experiment_exits_1_when_runs_fail(tmp_path, capsys):
    out = tmp_path / "t1"
    argv = ["experiment", "table1", "--sizes", "30", "--ranks", "1000", "--trials", "1"]
    status = main([*argv, "--methods", "baseline", "--workers", "1", "--out", str(out), "-q"])
    captured = capsys.readouterr()
    assert status == 1
    assert "0 of 1 runs finished, 1 failed" in captured.out
    assert "1 run(s) failed" in captured.err
    assert [r["status"] for r in read_records(out / "table1.jsonl").records] == ["failed"]


def test_item6_experiment_checks_the_data_folder_before_any_run(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("BMFDSL_DATA_DIR", raising=False)
    out = tmp_path / "t5"
    status = main(["experiment", "table5", "--data-dir", str(tmp_path / "none"), "--out", str(out)])
    assert status == 1
    assert "table5 needs the mnist data" in capsys.readouterr().err
    assert not (out / "table5.jsonl").exists()  # no failed records, one per run, as before
    # `all` checks every table's data before table1's first run
    status = main(["experiment", "all", "--data-dir", str(tmp_path / "none"), "--out", str(out)])
    assert status == 1 and "needs the mnist data" in capsys.readouterr().err
    assert not out.exists() or list(out.glob("*.jsonl")) == []


# --------------------------------------------------------------------------------------
# Item 7: conflicting duplicate records
# --------------------------------------------------------------------------------------


def _ok_record(run_id: str, error: int) -> dict:
    return {
        "run_id": run_id,
        "status": "ok",
        "table": 2,
        "group": "m=30",
        "method": "baseline",
        "rank": 1,
        "error": error,
        "relative_error": error / 100,
        "timings": {"total": 0.1},
    }


def test_item7_conflicting_duplicate_records_are_named(tmp_path, capsys):
    path = tmp_path / "table2.jsonl"
    records = [_ok_record("a", 5), _ok_record("b", 3), _ok_record("a", 7), _ok_record("b", 3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert read_records(path).conflicts() == ["a"]  # "b" twice with one answer is fine
    text = render_report(tmp_path)
    assert "**Conflicting records**" in text and "'a'" in text
    assert "warning:" in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# Item 10: factorize --out
# --------------------------------------------------------------------------------------


@pytest.fixture
def small_csv(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("gene,s1,s2,s3\n=cmd,1,0,1\n@x,0,1,1\n+y,1,0,1\n")
    return path


def test_item10_out_is_checked_before_solving(tmp_path, small_csv, monkeypatch, capsys):
    import bmfdsl.pipeline

    def no_solve(*args, **kwargs):
        raise AssertionError("the folder must be checked before the solve")

    monkeypatch.setattr(bmfdsl.pipeline, "factorize", no_solve)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["factorize", str(small_csv), "-r", "1", "--out", str(blocker / "out")]) == 1
    assert "is not a folder" in capsys.readouterr().err


def test_item10_out_writes_atomically_and_never_through_symlinks(tmp_path, small_csv):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / "U.csv").symlink_to(victim)
    (out / "report.json").symlink_to(victim)
    assert main(["factorize", str(small_csv), "-r", "1", "--seed", "0", "--out", str(out)]) == 0
    assert victim.read_text() == "keep me"
    for name in ("U.csv", "V.csv", "report.json"):
        path = out / name
        assert not path.is_symlink()
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask()  # the umask, not 0600
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no temp files


# --------------------------------------------------------------------------------------
# Item 13: labels verbatim, or escaped for spreadsheets
# --------------------------------------------------------------------------------------


def test_item13_escape_formulas_neutralises_leading_characters(tmp_path, small_csv):
    plain, escaped = tmp_path / "plain", tmp_path / "escaped"
    base = ["factorize", str(small_csv), "-r", "1", "--seed", "0"]
    assert main([*base, "--out", str(plain)]) == 0
    assert main([*base, "--out", str(escaped), "--escape-formulas"]) == 0
    verbatim = [line.split(",")[0] for line in (plain / "U.csv").read_text().splitlines()]
    safe = [line.split(",")[0] for line in (escaped / "U.csv").read_text().splitlines()]
    assert verbatim == ["row", "=cmd", "@x", "+y"]
    assert safe == ["row", "'=cmd", "'@x", "'+y"]


def test_item13_the_scheduler_is_documented_as_trusted():
    from bmfdsl.apps._cli import build_parser

    parser = build_parser()
    experiment = parser._subparsers._group_actions[0].choices["experiment"]
    helps = {action.dest: action.help or "" for action in experiment._actions}
    assert "trusted" in helps["scheduler"] and "pickle" in helps["scheduler"]


# --------------------------------------------------------------------------------------
# Item 14: clear errors for files and the command line
# --------------------------------------------------------------------------------------


def test_item14_read_data_arguments_are_typed_errors(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("1,0\n0,1\n")
    with pytest.raises(InvalidParameterError, match="is a folder"):
        read_data(tmp_path)
    with pytest.raises(InvalidParameterError, match="path must be a file path"):
        read_data(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="header must be None"):
        read_data(path, header="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="index_col=99 is past the last column"):
        read_data(path, index_col=99)
    with pytest.raises(InvalidParameterError, match="index_col must be"):
        read_data(path, index_col=-1)


def test_item14_huge_cells_are_numbers_and_named_right(tmp_path):
    from bmfdsl import factorize

    path = tmp_path / "a.csv"
    path.write_text("1,0\n99999999999999999999,1\n")
    assert read_data(path).values.tolist() == [[1.0, 0.0], [1e20, 1.0]]  # no IndexError
    path.write_text("1,0\n1e300,1\n")
    values = read_data(path).values
    assert values[1, 0] == 1e300  # not cast to -9223372036854775808
    with pytest.raises(InvalidMatrixError, match=r"e\.g\. 1e\+300"):
        factorize(values, 1)


def test_item14_cr_only_line_endings_are_read(tmp_path):
    path = tmp_path / "mac.csv"
    path.write_bytes(b"a,b\r1,0\r0,1\r")
    data = read_data(path)
    assert data.column_labels == ["a", "b"] and data.values.tolist() == [[1, 0], [0, 1]]


def test_item14_no_allow_pickle_advice(tmp_path):
    text = tmp_path / "text.npy"
    text.write_text("hello")
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([1, "a", None], dtype=object), allow_pickle=True)
    for path, reason in ((text, "not a NumPy .npy file"), (objects, "Python objects")):
        with pytest.raises(InvalidMatrixError, match=reason) as info:
            read_data(path)
        assert "allow_pickle" not in str(info.value)


def test_item14_report_and_figures_refuse_missing_or_empty_folders(tmp_path, capsys):
    missing = tmp_path / "missing"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(missing)]) == 1
    assert main(["report", str(empty)]) == 1
    assert main(["figures", str(missing)]) == 1
    err = capsys.readouterr().err
    assert "no results folder" in err and "no results in" in err
    assert ".report.md." not in err  # no temporary file name
    assert not missing.exists()  # figures did not create it


def test_item14_negative_seed_is_a_usage_error(small_csv, capsys):
    assert main(["factorize", str(small_csv), "-r", "1", "--seed", "-1"]) == 2
    assert "a seed is a non-negative integer" in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# Small things
# --------------------------------------------------------------------------------------


def test_small_report_and_meta_follow_the_umask(tmp_path):
    path = tmp_path / "meta.json"
    write_text_atomic(path, "{}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask()


def test_small_progress_line_is_cleared_before_the_summary(monkeypatch):
    import time

    from bmfdsl.progress import activity, stage

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with activity("factorize", enabled=True, delay=0.1):
        stage("ALS polish")
        time.sleep(0.8)
    shown = terminal.getvalue()
    assert "ALS polish" in shown  # it was drawn
    assert shown.endswith("\r") and shown.rstrip("\r").split("\r")[-1].strip() == ""


def test_small_runner_eta_reads_timings_total_and_interrupt_counts_saved_runs(tmp_path):
    from bmfdsl.apps.experiments._runner import plan_runs
    from bmfdsl.apps.experiments._scheduling import _append_as_finished
    from bmfdsl.apps.experiments._tables import get_experiment

    tasks = plan_runs(
        get_experiment("table2"), sizes=[30], ranks=[1, 2, 3], trials=1, methods=["baseline"]
    )

    class Bar:
        def __init__(self) -> None:
            self.seconds: list = []

        def finished(self, task, seconds):
            self.seconds.append(seconds)

        def close(self):
            pass

    def stream():
        for task, total in zip(tasks[:2], (0.5, 0.25), strict=True):
            yield {**_ok_record(task.run_id, 1), "timings": {"total": total}}
        raise KeyboardInterrupt

    bar = Bar()
    finished = {"earlier": _ok_record("earlier", 1)}
    with pytest.raises(KeyboardInterrupt, match=r"2 run\(s\) of this call and 1 earlier"):
        _append_as_finished(stream(), tmp_path / "t.jsonl", finished, tasks, bar)  # type: ignore[arg-type]
    assert bar.seconds == [0.5, 0.25]  # not None: the ETA has costs to learn from
    assert len(read_records(tmp_path / "t.jsonl").records) == 2


def test_small_resumed_report_says_damaged_lines_were_redone(tmp_path):
    path = tmp_path / "table2.jsonl"
    damaged = {"run_id": "a", "status": "ok"}  # fields missing: skipped
    path.write_text(json.dumps(damaged) + "\n")
    before = read_records(path).skipped_summary(path.name)
    assert "re-running the experiment redoes them" in before
    with path.open("a") as stream:
        stream.write(json.dumps(_ok_record("a", 2)) + "\n")
    after = read_records(path).skipped_summary(path.name)
    assert "redone since" in after and "redoes them" not in after


def test_small_summary_names_missing_cells_and_a_skipped_certificate(tmp_path, capsys):
    from types import SimpleNamespace

    from bmfdsl.apps._cli import _summary_notes

    path = tmp_path / "a.csv"
    path.write_text("1,0,1\n0,,1\n1,1,\n")
    assert main(["factorize", str(path), "-r", "1", "--seed", "0"]) == 0
    assert "2 missing cells ignored" in capsys.readouterr().out
    result = SimpleNamespace(info={"certify": {"status": "skipped", "reason": "model too large"}})
    data = MatrixData(np.ones((2, 2)))
    assert _summary_notes(data, result) == ", certify skipped: model too large"


def test_small_reprs_are_short():
    from bmfdsl.apps._datafiles import GeneExpressionData

    genes = tuple(f"gene{k}" for k in range(5000))
    data = GeneExpressionData(
        np.ones((5000, 38), dtype=np.int8),
        genes,
        ("s",) * 38,
        {"ALL/AML": ("ALL",) * 38},
        (7129, 38),
    )
    assert len(repr(data)) < 200 and "5000x38" in repr(data)
    matrix = MatrixData(np.ones((5000, 38)), row_labels=list(genes))
    assert len(repr(matrix)) < 200 and "row labels: 5000" in repr(matrix)


def test_item1_the_estimator_names_its_argument():
    model = BinaryMatrixFactorization(1)
    bad = scipy.sparse.csr_array(np.eye(2))
    bad.indices = np.array([0, 9], dtype=bad.indices.dtype)
    with pytest.raises(InvalidMatrixError, match="X is a damaged sparse CSR"):
        model.fit(bad)

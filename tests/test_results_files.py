"""Results files under damage: bad records, empty meta, symlinks, two runners on one folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bmfdsl.apps._io import write_text_atomic
from bmfdsl.apps.experiments import run_experiment
from bmfdsl.apps.experiments._records import (
    LOCK_NAME,
    OutDirLockedError,
    ResultsPathError,
    lock_out_dir,
    read_records,
)
from bmfdsl.apps.experiments._report import render_report, write_report
from bmfdsl.apps.experiments._runner import results_path
from bmfdsl.errors import BmfdslError
from bmfdsl.linalg import relative_error, squared_error
from bmfdsl.result import Factorization

CALLS: list[str] = []


def zero_method(A, rank, settings):
    CALLS.append("run")
    U = np.zeros((A.shape[0], rank), dtype=np.int8)
    V = np.zeros((A.shape[1], rank), dtype=np.int8)
    error = squared_error(A, U, V)
    return Factorization(U, V, error, relative_error(error, A), info={})


def run(out, **options):
    settings = {
        "sizes": [30],
        "ranks": [1, 2],
        "trials": 1,
        "methods": ["zero"],
        "method_table": {"zero": zero_method},
        "workers": 1,
        "progress": False,
    }
    return run_experiment("table1", out, **{**settings, **options})


@pytest.fixture(autouse=True)
def no_calls_yet():
    CALLS.clear()


@pytest.fixture
def finished(tmp_path):
    run(tmp_path)
    CALLS.clear()
    return tmp_path


def lines_of(out) -> list[dict]:
    return [json.loads(line) for line in results_path(out, "table1").read_text().splitlines()]


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (b"\xff\xfe\n", "not UTF-8"),
        (b'{"run_id": "x", "status": "ok"}\n', "missing field 'table'"),
        (b"[1, 2]\n", "not an object"),
        (b'{"run_id": 7, "status": "ok"}\n', "field 'run_id' has the wrong type"),
    ],
    ids=["bad-utf8", "missing-fields", "list", "wrong-type"],
)
def test_report_skips_bad_records_and_names_them(finished, capsys, damage, problem):
    with results_path(finished, "table1").open("ab") as stream:
        stream.write(damage)
    text = render_report(finished)
    assert "Runs: 2 ok, 0 failed" in text
    assert "skipped 1 damaged record(s) (line 3" in text and problem in text
    assert "line 3" in capsys.readouterr().err


def test_a_record_with_wrong_field_types_is_rerun_on_resume(finished, capsys):
    records = lines_of(finished)
    damaged = {**records[0], "rank": "1", "relative_error": "0.5"}
    path = results_path(finished, "table1")
    path.write_text(json.dumps(damaged) + "\n" + json.dumps(records[1]) + "\n")
    report = render_report(finished)
    assert "Runs: 1 ok" in report and repr(records[0]["run_id"]) in report
    again = run(finished)
    assert CALLS == ["run"]  # only the damaged run is redone
    assert [r["run_id"] for r in again] == [r["run_id"] for r in records]
    assert again[0]["relative_error"] == records[0]["relative_error"]
    assert "skipped 1 damaged record" in capsys.readouterr().err


def test_an_empty_or_damaged_meta_file_does_not_break_the_report(finished):
    meta = finished / "table1.meta.json"
    for content in ("", "{not json", "[]", '{"wall_seconds": "soon", "versions": 3}'):
        meta.write_text(content)
        assert "Runs: 2 ok" in render_report(finished)


def test_meta_and_report_replace_a_symlink_instead_of_writing_through_it(tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / "table1.meta.json").symlink_to(outside)
    (out / "report.md").symlink_to(outside)
    run(out)
    write_report(out)
    assert outside.read_text() == "keep me"
    assert not (out / "table1.meta.json").is_symlink()
    assert json.loads((out / "table1.meta.json").read_text())["experiment"] == "table1"
    assert not (out / "report.md").is_symlink()
    assert [p.name for p in out.iterdir() if p.name.startswith(".table1")] == []  # no temp left


def test_results_are_never_appended_through_a_symlink(tmp_path):
    outside = tmp_path / "precious.jsonl"
    outside.write_text("")
    out = tmp_path / "out"
    out.mkdir()
    results_path(out, "table1").symlink_to(outside)
    with pytest.raises(ResultsPathError, match="symlink") as caught:
        run(out)
    assert isinstance(caught.value, BmfdslError) and isinstance(caught.value, OSError)
    assert outside.read_text() == ""


def test_a_symlinked_lock_file_is_refused(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.write_text("")
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).symlink_to(outside)
    with pytest.raises(ResultsPathError, match="lock file"):
        run(out)
    assert outside.read_text() == "" and CALLS == []


def test_an_atomic_write_that_fails_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "meta.json"
    target.write_text("old")

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        write_text_atomic(target, "new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json"]


def test_a_second_runner_on_the_same_folder_is_refused_naming_the_pid(tmp_path):
    with lock_out_dir(tmp_path), pytest.raises(OutDirLockedError, match=f"pid {os.getpid()}"):
        run(tmp_path)
    assert CALLS == []
    run(tmp_path)  # free again once the holder is done
    assert len(CALLS) == 2


HOLDER = textwrap.dedent(
    """
    import sys, time
    from bmfdsl.apps.experiments._records import lock_out_dir
    with lock_out_dir(sys.argv[1]):
        print("held", flush=True)
        time.sleep(60)
    """
)


def test_a_lock_held_by_a_killed_runner_is_not_stale(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(OutDirLockedError, match=f"pid {holder.pid}"):
            run(tmp_path)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert (tmp_path / LOCK_NAME).exists()  # the file stays; its lock died with the process
    run(tmp_path)
    assert len(read_records(results_path(tmp_path, "table1")).records) == 2

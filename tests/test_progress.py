"""Progress on stderr: shown on request or on a terminal, silent otherwise; one-line Ctrl-C."""

from __future__ import annotations

import time

from bmfdsl.apps import _cli as cli
from bmfdsl.apps.experiments._run_progress import CostModel
from bmfdsl.apps.experiments._runner import plan_runs
from bmfdsl.apps.experiments._tables import get_experiment
from bmfdsl.progress import activity, stage


def test_activity_shows_elapsed_time_and_stage_when_enabled(capsys):
    with activity("factorize", enabled=True, delay=0):
        stage("ALS polish")
        time.sleep(0.7)  # the ticker redraws every 0.5 s
    err = capsys.readouterr().err
    assert "factorize:" in err and "ALS polish" in err


def test_activity_is_silent_when_stderr_is_not_a_terminal(capsys):
    with activity("factorize", delay=0) as bar:  # capsys' stderr is not a TTY
        stage("solve")
    assert bar is None
    assert capsys.readouterr().err == ""


def test_cost_model_weights_runs_by_size_and_method():
    tasks = plan_runs(
        get_experiment("table2"), sizes=[30, 50000], ranks=[1], trials=1, methods=["baseline"]
    )
    small, large = tasks
    model = CostModel()
    assert model.estimate(small) is None  # nothing timed yet
    model.observe(small, 0.02)
    assert model.estimate(small) == 0.02
    assert model.estimate(large) > 100 * model.estimate(small)  # scaled by size, not a count
    model.observe(large, 3.0)
    assert model.estimate(large) == 3.0  # its own cell's timing wins once known


def test_interrupt_is_one_line_with_exit_130(monkeypatch, capsys, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt("3 finished runs are saved in out/table1.jsonl")

    monkeypatch.setattr("bmfdsl.apps.experiments._scheduling.run_experiment", interrupted)
    status = cli.main(["experiment", "table1", "--out", str(tmp_path)])
    assert status == cli.EXIT_INTERRUPTED
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bmfdsl: interrupted: 3 finished runs are saved in out/table1.jsonl"]

"""The report's lead view: ours beside the paper's best, a marker exactly where we are worse."""

from __future__ import annotations

import numpy as np

from bmfdsl.apps.experiments import run_experiment
from bmfdsl.apps.experiments._report import WORSE_MARK, load_paper_tables, render_report
from bmfdsl.linalg import relative_error, squared_error
from bmfdsl.result import Factorization


def zero_factors(A, rank, settings):
    """U = V = 0: relative error exactly 1, worse than every paper value below 1."""
    U = np.zeros((A.shape[0], rank), dtype=np.int8)
    V = np.zeros((A.shape[1], rank), dtype=np.int8)
    error = squared_error(A, U, V)
    return Factorization(U, V, error, relative_error(error, A))


def test_lead_view_marks_every_rank_where_ours_is_worse(tmp_path):
    run_experiment(
        "table2",
        tmp_path,
        sizes=[30],
        ranks=[1, 2],
        trials=1,
        methods=["bmfdsl"],
        method_table={"bmfdsl": zero_factors},
        progress=False,
        workers=1,
    )
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "table2_error_vs_rank.png").write_bytes(b"png")
    report = render_report(tmp_path)
    paper = load_paper_tables()
    lead = report[report.index("Lead view") :].split("\n\n")[1].splitlines()
    assert lead[0] == "| r | bmfdsl (− paper's best) | paper's best |"
    for rank, line in zip([1, 2], lead[2:], strict=True):
        best = min(v for (t, g, _, r), v in paper.items() if (t, g, r) == (2, "m=30", rank))
        assert f"| {rank} | 1.0000 ({1 - best:+.4f}) {WORSE_MARK} | {best:.4f} (" in line
    assert "![table2: error vs rank](figures/table2_error_vs_rank.png)" in report

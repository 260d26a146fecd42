"""Reading delimited text: bmfdsl.apps._io.read_data vs numpy.loadtxt, and the junk-file guard.

Shapes: 5,000 x 200 0/1 (the issue's case), 50,000 x 30 0/1, and the 5,000 x 200 one with a
header row and row labels (which np.loadtxt cannot read). Also the time to reject a 1 GiB
all-NUL file (sparse on disk). Best of ``--repeats`` calls. Writes ``bench/results/io.json``
and ``bench/results/io.md``.

    python bench/bench_io.py
    python bench/bench_io.py --repeats 5
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from bmfdsl.apps import read_data
from bmfdsl.errors import InvalidMatrixError

RESULTS = Path(__file__).resolve().parent / "results"


def best_of(repeats: int, function) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for m, n in ((5000, 200), (50000, 30)):
            A = (rng.random((m, n)) < 0.3).astype(np.int8)
            path = root / f"a{m}.csv"
            np.savetxt(path, A, fmt="%d", delimiter=",")
            assert (read_data(path).values == A).all()
            rows.append(
                {
                    "case": f"{m} x {n}, 0/1, no labels",
                    "read_data_s": best_of(args.repeats, lambda p=path: read_data(p)),
                    "loadtxt_s": best_of(
                        args.repeats, lambda p=path: np.loadtxt(p, delimiter=",", ndmin=2)
                    ),
                }
            )
        A = (rng.random((5000, 200)) < 0.3).astype(np.int8)
        labelled = root / "labelled.csv"
        lines = ["gene," + ",".join(f"s{j}" for j in range(200))]
        lines += [f"g{i}," + ",".join(map(str, row)) for i, row in enumerate(A)]
        labelled.write_text("\n".join(lines) + "\n")
        data = read_data(labelled)
        assert (data.values == A).all() and data.row_labels[0] == "g0"
        rows.append(
            {
                "case": "5000 x 200, header + row labels",
                "read_data_s": best_of(args.repeats, lambda: read_data(labelled)),
                "loadtxt_s": None,
            }
        )
        junk = root / "junk.csv"
        with junk.open("wb") as handle:
            handle.truncate(2**30)

        def reject() -> None:
            try:
                read_data(junk)
            except InvalidMatrixError:
                return
            raise AssertionError("junk accepted")

        rows.append(
            {
                "case": "1 GiB all-NUL file (rejected)",
                "read_data_s": best_of(args.repeats, reject),
                "loadtxt_s": None,
            }
        )
    result = {"machine": platform.platform(), "repeats": args.repeats, "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "io.json").write_text(json.dumps(result, indent=2) + "\n")
    table = [
        "# Reading delimited text",
        "",
        "`python bench/bench_io.py` (best of "
        f"{args.repeats}; {platform.platform()}, a 2-core CPU shared with other jobs).",
        "",
        "| case | read_data (s) | np.loadtxt (s) |",
        "|---|---:|---:|",
    ]
    for row in rows:
        loadtxt = "—" if row["loadtxt_s"] is None else f"{row['loadtxt_s']:.3f}"
        table.append(f"| {row['case']} | {row['read_data_s']:.3f} | {loadtxt} |")
    (RESULTS / "io.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()

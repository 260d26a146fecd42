"""Command-line conventions: version, python -m, help, exit codes, labelled outputs, datasets."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest

import bmfdsl
from bmfdsl.apps import load_leukemia, load_melanoma, main, make_exact_rank
from bmfdsl.apps._cli import EXIT_DATA_ERROR, EXIT_USAGE, build_parser, read_input


def run_module(*args, stdin=None, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "bmfdsl", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_version_and_python_dash_m():
    result = run_module("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"bmfdsl {bmfdsl.__version__}"


def test_every_factorize_option_has_help_with_an_example_or_default():
    parser = build_parser()
    factorize = parser._subparsers._group_actions[0].choices["factorize"]  # argparse's own API
    for action in factorize._actions:
        if action.dest in ("help",) or not action.option_strings:
            continue
        text = action.help or ""
        assert "e.g." in text or action.dest in ("header", "no_als"), action.dest
        # the formatter appends "(default: X)" to the help of an option with a real default
        has_default = "default" in text or action.default not in (None, False)
        assert has_default or action.dest == "rank", action.dest
    help_text = factorize.format_help()
    assert "exit status" in help_text and "130" in help_text


def test_usage_errors_exit_2_and_data_errors_exit_1(tmp_path, capsys):
    assert main(["factorize"]) == EXIT_USAGE
    assert main(["factorize", str(tmp_path / "a.csv"), "-r", "x"]) == EXIT_USAGE
    assert main(["factorize", str(tmp_path / "none.csv"), "-r", "1"]) == EXIT_DATA_ERROR
    assert main(["factorize", str(tmp_path / "a.csv"), "-r", "1", "--binarize", "nan"]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "finite" in err


def test_debug_is_accepted_anywhere(tmp_path):
    missing = str(tmp_path / "none.csv")
    for argv in (
        ["--debug", "factorize", missing, "-r", "1"],
        ["factorize", missing, "--debug", "-r", "1"],
    ):
        with pytest.raises(FileNotFoundError):
            main(argv)


def test_without_out_prints_a_summary_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "A.csv"
    np.savetxt(path, make_exact_rank(10, 6, 2, random_state=0), fmt="%d", delimiter=",")
    assert main(["factorize", str(path), "-r", "2", "--seed", "0", "--quiet"]) == 0
    assert "error 0" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A.csv"]


def test_labelled_input_gives_labelled_factors_and_clusters(tmp_path):
    blocks = np.kron(np.eye(2, dtype=int), np.ones((3, 2), dtype=int))  # 6 genes x 4 samples
    genes, samples = [f"g{i}" for i in range(6)], ["s1", "s2", "s3", "s4"]
    lines = ["gene;" + ";".join(samples)]
    lines += [f"{gene};" + ";".join(map(str, row)) for gene, row in zip(genes, blocks, strict=True)]
    source = tmp_path / "expr.csv"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    argv = ["factorize", str(source), "-r", "2", "--one-hot", "V", "--seed", "0", "--out", str(out)]
    assert main(argv) == 0
    U = np.genfromtxt(out / "U.csv", delimiter=",", dtype=str)
    V = np.genfromtxt(out / "V.csv", delimiter=",", dtype=str)
    clusters = np.genfromtxt(out / "clusters.csv", delimiter=",", dtype=str)
    assert U[0].tolist() == ["row", "k0", "k1"] and U[1:, 0].tolist() == genes
    assert V[0].tolist() == ["column", "k0", "k1"] and V[1:, 0].tolist() == samples
    product = U[1:, 1:].astype(int) @ V[1:, 1:].astype(int).T
    np.testing.assert_array_equal(product, blocks)
    assert clusters[0].tolist() == ["column", "cluster"]
    assert clusters[1, 1] == clusters[2, 1] != clusters[3, 1] == clusters[4, 1]


def test_stdin_and_missing_cells(tmp_path):
    A = make_exact_rank(8, 5, 2, random_state=1)
    text = "\n".join(",".join(map(str, row)) for row in A) + "\n"
    result = run_module("factorize", "-", "-r", "2", "--seed", "0", stdin=text, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "8x5, rank 2: error 0" in result.stdout
    holes = text.replace("1,", ",", 1)  # a missing cell: factorized as missing data
    result = run_module("factorize", "-", "-r", "2", "--seed", "0", stdin=holes, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "error 0" in result.stdout


def test_weights_by_name(tmp_path, capsys):
    source = tmp_path / "A.csv"
    np.savetxt(source, make_exact_rank(4, 3, 1, random_state=2), fmt="%d", delimiter=",")
    args = ["factorize", str(source), "-r", "1", "--backend", "exact", "--out", str(tmp_path)]
    assert main([*args, "--weight", "lam=3", "--weight", "lam=4"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["info"]["weights"] == {"lam": 4.0}
    assert main([*args, "--weight", "mu=1"]) == EXIT_DATA_ERROR
    assert "unknown weight 'mu'" in capsys.readouterr().err
    assert main([*args, "--weight", "lam"]) == EXIT_USAGE
    assert "NAME=VALUE" in capsys.readouterr().err


def test_datasets_check(tmp_path, capsys, data_dir):
    assert main(["datasets", "check", str(data_dir)]) == 0
    assert capsys.readouterr().out.count("sha256 matches") == 6
    (tmp_path / "mnist").mkdir()
    (tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"x")
    assert main(["datasets", "check", str(tmp_path)]) == EXIT_DATA_ERROR
    listing = capsys.readouterr().out
    assert "missing" in listing and "1 bytes, expected 4542" in listing


def test_backends_without_credentials_say_so(monkeypatch, capsys):
    monkeypatch.delenv("BMFDSL_DA_API_KEY", raising=False)
    assert main(["backends"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("fujitsu-da"))
    assert "installed, no credentials (set BMFDSL_DA_API_KEY)" in line
    monkeypatch.setenv("BMFDSL_DA_API_KEY", "not-a-real-key")
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("fujitsu-da"))
    assert "available" in line and "no credentials" not in line
    assert "not-a-real-key" not in out


# -- data as it comes: expression files, label files, two-sided binarization, empty lines --


def matrix_sha256(values):
    return hashlib.sha256(np.ascontiguousarray(values, dtype=np.int8).tobytes()).hexdigest()


def read_as_the_cli_does(*argv):
    return read_input(build_parser().parse_args(["factorize", *argv, "-r", "2"]))


@pytest.mark.data
def test_the_cli_reads_leukemia_as_the_loader_does(data_dir):
    folder = data_dir / "leukemia"
    data, dropped = read_as_the_cli_does(
        str(folder / "ALL_AML_data.txt"),
        "--binarize",
        "1/7:5",
        "--drop-empty",
        "--row-labels",
        str(folder / "ALL_AML_genes.txt"),
        "--column-labels",
        str(folder / "ALL_AML_samples.txt"),
    )
    expected = load_leukemia(data_dir)
    assert data.shape == expected.matrix.shape == (4806, 38)
    assert matrix_sha256(data.values) == matrix_sha256(expected.matrix)
    assert tuple(data.row_labels) == expected.genes
    assert tuple(data.column_labels) == expected.samples
    assert len(dropped.rows) == 5000 - 4806 and dropped.columns == []


@pytest.mark.data
def test_the_cli_reads_melanoma_as_the_loader_does(data_dir):
    data, _ = read_as_the_cli_does(
        str(data_dir / "melanoma" / "bittner-2000_database.txt"),
        "--header-rows",
        "2",
        "--index-col",
        "0",
        "--binarize",
        "0.96:1.04",
        "--shift-nonnegative",
        "--normalize-columns",
        "--drop-empty",
    )
    expected = load_melanoma(data_dir)
    assert data.shape == expected.matrix.shape == (2201, 38)
    assert matrix_sha256(data.values) == matrix_sha256(expected.matrix)
    assert tuple(data.row_labels) == expected.genes
    assert tuple(data.column_labels) == expected.samples


def test_two_sided_binarization_keeps_missing_cells_and_the_summary_reports_drops(tmp_path, capsys):
    values = np.array(
        [[1.0, 9.0, 1.0, 9.0], [5.0, 5.0, 5.0, 5.0], [9.0, 1.0, 5.0, np.nan], [1, 9, 1, 9]]
    )
    kappa = np.nanmean(values)  # 5.0: 1 <= kappa/2 and 9 >= 1.5 kappa are ones, 5 is not
    lines = ["gene,s1,s2,s3,s4", "class,A,B,A,B"]
    lines += [
        f"g{i}," + ",".join("" if np.isnan(x) else f"{x:g}" for x in row)
        for i, row in enumerate(values)
    ]
    source = tmp_path / "expr.csv"
    source.write_text("\n".join(lines) + "\n")
    labels = tmp_path / "samples.txt"
    labels.write_text("sample\nx1\nx2\nx3\nx4\n\x00\x00")  # a header line and NUL padding
    data, dropped = read_as_the_cli_does(
        str(source),
        "--header-rows",
        "2",
        "--binarize",
        "1/2:1.5",
        "--drop-empty",
        "rows",
        "--column-labels",
        str(labels),
    )
    assert kappa == 5.0 and data.row_labels == ["g0", "g2", "g3"]
    assert data.column_labels == ["x1", "x2", "x3", "x4"]
    assert np.isnan(data.values[1, 3]) and data.missing == 1
    assert np.array_equal(np.nan_to_num(data.values), [[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 1]])
    assert dropped.row_names == ["g1"] and dropped.columns == []
    argv = ["factorize", str(source), "-r", "1", "--header-rows", "2", "--seed", "0"]
    assert main([*argv, "--binarize", "1/2:1.5", "--drop-empty", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "1 missing cell ignored" in out and "dropped all-zero 1 row (g1) and 0 columns" in out
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["dropped"] == {"rows": ["g1"], "columns": []} and report["missing_cells"] == 1


def test_reading_options_refuse_what_cannot_work(tmp_path, capsys):
    source = tmp_path / "A.csv"
    np.savetxt(source, make_exact_rank(4, 3, 1, random_state=2), fmt="%d", delimiter=",")
    labels = tmp_path / "rows.txt"
    labels.write_text("a\nb\n")
    argv = ["factorize", str(source), "-r", "1"]
    assert main([*argv, "--binarize", "5:1"]) == EXIT_USAGE
    assert main([*argv, "--shift-nonnegative"]) == EXIT_DATA_ERROR
    assert "--binarize LOW:HIGH" in capsys.readouterr().err
    assert main([*argv, "--row-labels", str(labels)]) == EXIT_DATA_ERROR
    assert "holds 2 row labels, but the matrix has 4 rows" in capsys.readouterr().err


def test_binarize_refuses_an_overflowing_threshold_with_a_usage_error(tmp_path, capsys):
    path = tmp_path / "a.csv"
    path.write_text("0.5,2\n3,0.1\n")
    for value in ("1e400", "1/0", "2/1e400"):
        assert main(["factorize", str(path), "-r", "1", "--binarize", value]) == EXIT_USAGE
        assert "finite number" in capsys.readouterr().err

"""The factorize pipeline, the estimator, file reading and the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bmfdsl import (
    BinaryMatrixFactorization,
    InvalidMatrixError,
    InvalidParameterError,
    UnknownNameError,
    factorize,
)
from bmfdsl.apps import main, make_exact_rank

RNG = np.random.default_rng(7)
FAST_NEAL = {"backend": "neal", "num_reads": 4, "num_sweeps": 200}


def planted(m: int, n: int, r: int, seed: int) -> np.ndarray:
    return make_exact_rank(m, n, r, random_state=seed)


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_planted_30x30_recovered_exactly_with_defaults(rank):
    A = planted(30, 30, rank, seed=rank)
    result = factorize(A, rank, random_state=0)
    assert result.error == 0
    assert result.relative_error == 0.0
    np.testing.assert_array_equal(result.U.astype(int) @ result.V.T.astype(int), A)
    assert set(np.unique(result.U)) <= {0, 1} and set(np.unique(result.V)) <= {0, 1}
    assert result.info["timings"]["total"] > 0


def test_same_seed_same_result_and_info_is_json():
    A = (RNG.random((40, 12)) < 0.5).astype(int)
    first = factorize(A, 3, random_state=11, **FAST_NEAL)
    second = factorize(A, 3, random_state=11, **FAST_NEAL)
    np.testing.assert_array_equal(first.U, second.U)
    np.testing.assert_array_equal(first.V, second.V)
    json.dumps(first.to_dict())
    assert first.info["backend"] == "neal" and first.info["weights"] == {"lam": 1.0}


def test_error_is_recomputed_and_als_never_hurts():
    A = (RNG.random((30, 20)) < 0.4).astype(int)
    raw = factorize(A, 3, als=False, random_state=3, **FAST_NEAL)
    polished = factorize(A, 3, als=True, random_state=3, **FAST_NEAL)
    assert raw.error == int(((A - raw.U.astype(int) @ raw.V.T.astype(int)) ** 2).sum())
    assert polished.error <= polished.info["error_before_als"]
    assert polished.info["error_before_als"] == raw.error


@pytest.mark.parametrize("method", ["baseline", "thresholded", "penalized"])
def test_comparison_methods_run_through_factorize(method):
    A = planted(25, 15, 2, seed=4)
    result = factorize(A, 2, method=method, als=False, random_state=0)
    assert result.U.shape == (25, 2) and result.V.shape == (15, 2)
    assert result.error == int(((A - result.U.astype(int) @ result.V.T.astype(int)) ** 2).sum())
    assert result.info["method"] == method


def test_sampling_pipeline_on_a_tall_matrix():
    A = planted(3000, 30, 3, seed=5)
    result = factorize(A, 3, sample_rows=30, als=True, random_state=2, **FAST_NEAL)
    assert result.info["sampled_rows"] == 30
    assert {"sampling", "compile", "solve", "bls", "als"} <= set(result.info["timings"])
    assert result.U.shape == (3000, 3)
    assert result.relative_error < 0.5


def test_wide_matrices_are_sampled_on_their_long_side():
    A = planted(30, 2500, 2, seed=6)
    result = factorize(A, 2, method="baseline", sample_rows="auto", random_state=0)
    assert result.info["transposed"] is True
    assert result.U.shape == (30, 2) and result.V.shape == (2500, 2)


def test_one_hot_clusters_every_column_once():
    A = planted(20, 12, 3, seed=8)
    result = factorize(A, 3, one_hot="V", random_state=0, **FAST_NEAL)
    assert (result.V.sum(axis=1) == 1).all()


def test_matrix_without_ones_has_a_defined_relative_error():
    result = factorize(np.zeros((6, 5), dtype=int), 2, random_state=0)
    assert result.error == 0 and result.relative_error == 0.0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"method": "simplex"}, UnknownNameError, "qubo"),
        ({"backend": "nope"}, UnknownNameError, "neal"),
        ({"sample_rows": 1}, InvalidParameterError, "smaller than the rank"),
        ({"sample_rows": "many"}, InvalidParameterError, "sample_rows"),
        ({"one_hot": "X"}, InvalidParameterError, "one_hot"),
        ({"method": "baseline", "num_reads": 3}, InvalidParameterError, "no backend parameters"),
        ({"backend": "neal", "bogus": 1}, UnknownNameError, "num_reads"),
        ({"weights": {"lam": -1.0}, "backend": "neal"}, InvalidParameterError, "positive"),
    ],
)
def test_bad_arguments_give_clear_errors(kwargs, error, message):
    A = planted(10, 8, 2, seed=1)
    with pytest.raises(error, match=message):
        factorize(A, 2, **kwargs)


def test_bad_matrix_and_rank():
    with pytest.raises(InvalidMatrixError, match="only 0 and 1"):
        factorize([[0, 3], [1, 1]], 1)
    with pytest.raises(InvalidParameterError, match="between 1 and"):
        factorize(np.ones((3, 4)), 4)


@pytest.mark.parametrize("one_hot", ["u", "U"])
def test_estimator_with_one_hot_u_transforms_to_one_hot_rows(one_hot):
    A = planted(12, 8, 3, seed=4)
    estimator = BinaryMatrixFactorization(
        3, one_hot=one_hot, backend="neal", backend_params={"num_reads": 4}, random_state=0
    )
    W = estimator.fit_transform(A)
    assert (W.sum(axis=1) == 1).all()
    assert (estimator.transform(A).sum(axis=1) == 1).all()


def test_factorize_reports_time_only_as_timings_in_seconds():
    result = factorize(planted(2100, 12, 2, seed=2), 2, method="baseline", random_state=0,
                       sample_rows="auto")  # fmt: skip
    timings = result.info["timings"]
    assert {"sampling", "solve", "bls", "als", "total"} <= set(timings)
    assert all(seconds >= 0 for seconds in timings.values())
    assert timings["total"] >= sum(v for k, v in timings.items() if k != "total")
    assert not {"total_time", "timing", "time_s"} & set(result.info)


def test_cli_round_trip(tmp_path, capsys):
    A = planted(12, 9, 2, seed=3)
    source = tmp_path / "A.csv"
    np.savetxt(source, A, fmt="%d", delimiter=",")
    out = tmp_path / "out"
    assert main(["factorize", str(source), "--rank", "2", "--seed", "1", "--out", str(out)]) == 0
    U = np.loadtxt(out / "U.csv", delimiter=",", dtype=int, ndmin=2)
    V = np.loadtxt(out / "V.csv", delimiter=",", dtype=int, ndmin=2)
    report = json.loads((out / "report.json").read_text())
    assert report["error"] == int(((A - U @ V.T) ** 2).sum()) == 0
    assert "relative 0.0000" in capsys.readouterr().out


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".mtx", ".tsv"])
def test_cli_reads_every_format(tmp_path, suffix):
    import scipy.io
    import scipy.sparse

    A = planted(10, 7, 2, seed=2)
    path = tmp_path / f"A{suffix}"
    if suffix == ".npy":
        np.save(path, A)
    elif suffix == ".npz":
        scipy.sparse.save_npz(path, scipy.sparse.csr_matrix(A))
    elif suffix == ".mtx":
        scipy.io.mmwrite(str(path), scipy.sparse.coo_matrix(A))
    else:
        path.write_text("\n".join("\t".join(map(str, row)) for row in A))
    out = tmp_path / "out"
    assert main(["factorize", str(path), "-r", "2", "--method", "baseline", "--out", str(out)]) == 0
    assert np.loadtxt(out / "U.csv", delimiter=",", ndmin=2).shape == (10, 2)


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (None, [], "no such file"),
        ("1,0\n1\n", [], "ragged"),
        ("0.2,3\n5,0\n", [], "--binarize"),
        ("1,0\n0,1\n", ["--rank", "5"], "rank must be between"),
        ("1,0\n0,1\n", ["--backend", "warp-drive"], "unknown backend"),
    ],
)
def test_cli_errors_are_one_line(tmp_path, capsys, content, args, message):
    path = tmp_path / "A.csv"
    if content is not None:
        path.write_text(content)
    argv = ["factorize", str(path), "--out", str(tmp_path / "o"), *(args or [])]
    if "--rank" not in argv:
        argv += ["--rank", "1"]
    assert main(argv) == 1  # a data or solver error (2 is for usage errors)
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_lists_models_and_backends(capsys):
    assert main(["models"]) == 0
    assert "formulation1" in capsys.readouterr().out
    assert main(["backends"]) == 0
    listing = capsys.readouterr().out
    assert "neal" in listing and "fujitsu-da" in listing

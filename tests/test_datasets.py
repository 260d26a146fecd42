"""Tests of apps._datasets and _datafiles: generators, IDX/MNIST, gene-expression discretisation."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from bmfdsl.apps import load_leukemia, load_melanoma, load_mnist, make_bernoulli, make_exact_rank
from bmfdsl.apps._datafiles import binarize_expression, read_idx
from bmfdsl.apps._datasets import make_sparse_planted
from bmfdsl.errors import InvalidMatrixError, InvalidParameterError


def _shared_data_dir() -> Path | None:
    candidates = [os.environ.get("BMFDSL_DATA_DIR"), Path(__file__).parents[2] / "shared" / "data"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "leukemia").is_dir():
            return Path(candidate)
    return None


SHARED = _shared_data_dir()
needs_data = pytest.mark.skipif(
    SHARED is None,
    reason="reference data not found: set BMFDSL_DATA_DIR or place it in ../shared/data",
)


# ---------------------------------------------------------------- generators


def test_bernoulli_shape_reproducible_and_density():
    A = make_bernoulli(300, 200, 0.2, random_state=3)
    assert A.shape == (300, 200) and A.dtype == np.int8
    assert set(np.unique(A)) <= {0, 1}
    assert abs(A.mean() - 0.2) < 0.01  # 60,000 draws: std of the mean is 0.0016
    assert np.array_equal(A, make_bernoulli(300, 200, 0.2, random_state=3))
    assert not np.array_equal(A, make_bernoulli(300, 200, 0.2, random_state=4))
    assert make_bernoulli(5, 4, 0.0, random_state=0).sum() == 0
    assert make_bernoulli(5, 4, 1.0, random_state=0).sum() == 20


@pytest.mark.parametrize(
    ("args", "message"),
    [((0, 3, 0.5), "m must"), ((3, 3, 1.5), "p must"), ((3, 2.5, 0.5), "n must")],
)
def test_bernoulli_rejects_bad_parameters(args, message):
    with pytest.raises(InvalidParameterError, match=message):
        make_bernoulli(*args)


def test_sparse_planted_is_reproducible_sparse_and_checked():
    A = make_sparse_planted(4000, 500, 4, random_state=2)
    assert A.format == "csr" and set(A.data.tolist()) == {1}
    assert 0.004 < A.nnz / (4000 * 500) < 0.02  # about 1% ones whatever the rank
    assert (make_sparse_planted(4000, 500, 4, random_state=2) != A).nnz == 0
    assert (make_sparse_planted(4000, 500, 4, random_state=3) != A).nnz > 0
    with pytest.raises(InvalidParameterError, match="r must"):
        make_sparse_planted(10, 10, 0)
    with pytest.raises(InvalidParameterError, match="n must"):
        make_sparse_planted(10, -1, 2)


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("m", [30, 2000])
def test_exact_rank_is_an_exact_binary_factorization(m, rank):
    for seed in range(3):
        A, U, V = make_exact_rank(m, 30, rank, random_state=seed, return_factors=True)
        assert A.shape == (m, 30) and U.shape == (m, rank) and V.shape == (30, rank)
        product = U.astype(np.int64) @ V.astype(np.int64).T
        assert product.max() <= 1  # binary: no pair of rows shares two components
        assert np.array_equal(A, product)
        assert A.any()


def test_exact_rank_only_removes_ones_from_the_initial_draw():
    # Algorithm 3 draws U then V from Bernoulli(0.7) and then only zeroes entries.
    for rank in (1, 3, 5):
        rng = np.random.default_rng(11)
        U0 = rng.random((40, rank)) < 0.7
        V0 = rng.random((30, rank)) < 0.7
        _, U, V = make_exact_rank(40, 30, rank, random_state=11, return_factors=True)
        assert np.all(U <= U0) and np.all(V <= V0)
        if rank == 1:  # u vᵀ is already binary: nothing to eliminate
            assert np.array_equal(U, U0) and np.array_equal(V, V0)
        else:
            assert U.sum() + V.sum() < U0.sum() + V0.sum()


def test_exact_rank_is_reproducible_and_returns_only_the_matrix_by_default():
    A = make_exact_rank(50, 30, 4, random_state=7)
    assert isinstance(A, np.ndarray)
    assert np.array_equal(A, make_exact_rank(50, 30, 4, random_state=7))
    assert not np.array_equal(A, make_exact_rank(50, 30, 4, random_state=8))


def test_exact_rank_rejects_bad_parameters():
    with pytest.raises(InvalidParameterError, match="rank"):
        make_exact_rank(5, 5, 0)
    with pytest.raises(InvalidParameterError, match="p_u"):
        make_exact_rank(5, 5, 2, p_u=1.0)


# ---------------------------------------------------------------- expression discretisation


def _binarize_by_loops(X, c1, c2, normalize, shift):
    X = np.array(X, dtype=float)
    if shift:
        X = X - X.min()
    if normalize:
        for j in range(X.shape[1]):
            X[:, j] /= np.sqrt(sum(x * x for x in X[:, j]))
    kappa = sum(X.flat) / X.size
    out = np.zeros(X.shape, dtype=int)
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            out[i, j] = int(X[i, j] <= kappa * c1 or X[i, j] >= kappa * c2)
    return out


@pytest.mark.parametrize(
    ("normalize", "shift", "c1", "c2"),
    [(False, False, 1 / 7, 5), (True, True, 0.96, 1.04), (True, False, 0.5, 1.5)],
)
def test_binarize_expression_matches_a_direct_reading_of_the_definition(normalize, shift, c1, c2):
    rng = np.random.default_rng(0)
    X = rng.lognormal(size=(40, 12)) * 100
    if shift:
        X = X - 150.0
    expected = _binarize_by_loops(X, c1, c2, normalize, shift)
    got = binarize_expression(X, c1, c2, normalize_columns=normalize, shift_nonnegative=shift)
    assert got.dtype == np.int8
    assert np.array_equal(got, expected)


def test_binarize_expression_errors():
    with pytest.raises(InvalidMatrixError, match="shift_nonnegative"):
        binarize_expression([[-1.0, 2.0]], 0.5, 2)
    with pytest.raises(InvalidParameterError, match="c1 < c2"):
        binarize_expression([[1.0, 2.0]], 2, 1)
    with pytest.raises(InvalidMatrixError, match="NaN"):
        binarize_expression([[np.nan, 2.0]], 0.5, 2)


# ---------------------------------------------------------------- MNIST (IDX)


def _idx_bytes(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 8, array.ndim]) + np.array(array.shape, dtype=">u4").tobytes()
    return header + array.astype(np.uint8).tobytes()


def write_fake_mnist(folder: Path, labels: np.ndarray, images: np.ndarray, gz: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for stem, array in (("t10k-images-idx3-ubyte", images), ("t10k-labels-idx1-ubyte", labels)):
        payload = _idx_bytes(array)
        if gz:
            (folder / f"{stem}.gz").write_bytes(gzip.compress(payload))
        else:
            (folder / stem).write_bytes(payload)


@pytest.mark.parametrize("gz", [True, False])
def test_load_mnist_takes_the_first_images_of_each_digit_and_thresholds_at_50(tmp_path, gz):
    rng = np.random.default_rng(1)
    labels = np.array([d for _ in range(3) for d in rng.permutation(10)], dtype=np.uint8)
    images = rng.integers(0, 256, size=(30, 28, 28)).astype(np.uint8)
    images[:, 0, 0] = 49
    images[:, 0, 1] = 50
    write_fake_mnist(tmp_path / "mnist", labels, images, gz)
    binary, got_labels = load_mnist(tmp_path, per_digit=2)  # finds the mnist/ subfolder
    assert binary.shape == (20, 28, 28) and binary.dtype == np.int8
    assert got_labels.tolist() == [d for d in range(10) for _ in range(2)]
    for position in range(20):
        digit, nth = divmod(position, 2)
        source = np.flatnonzero(labels == digit)[nth]
        assert np.array_equal(binary[position], images[source] >= 50)
    assert binary[:, 0, 0].sum() == 0 and binary[:, 0, 1].sum() == 20
    with pytest.raises(InvalidParameterError, match="per_digit"):
        load_mnist(tmp_path, per_digit=4)


def test_read_idx_rejects_truncated_files(tmp_path):
    path = tmp_path / "broken"
    path.write_bytes(_idx_bytes(np.zeros((3, 2), dtype=np.uint8))[:-1])
    with pytest.raises(InvalidMatrixError, match="truncated"):
        read_idx(path)


def test_loaders_name_the_environment_variable_when_no_path(monkeypatch):
    monkeypatch.delenv("BMFDSL_DATA_DIR", raising=False)
    with pytest.raises(InvalidParameterError, match="BMFDSL_DATA_DIR"):
        load_melanoma()
    with pytest.raises(FileNotFoundError, match="BMFDSL_DATA_DIR"):
        load_mnist("/nonexistent-bmfdsl-folder")


# ---------------------------------------------------------------- gene expression files


def write_fake_leukemia(folder: Path, values: np.ndarray, samples: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["\t".join(str(int(v)) for v in row) for row in values]
    (folder / "ALL_AML_data.txt").write_bytes(("\r\n".join(rows) + "\r\n").encode())
    genes = ["Name\tDescription"] + [f"G{i}_at\tgene {i}" for i in range(len(values))]
    (folder / "ALL_AML_genes.txt").write_bytes(("\r\n".join(genes) + "\r\n").encode())
    (folder / "ALL_AML_samples.txt").write_bytes(
        ("\r\n".join(samples) + "\r\n").encode() + b"\x00" * 50
    )


def write_fake_melanoma(path: Path, values: np.ndarray, samples: list[str], clusters: list[str]):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "\t" + "\t".join(f'"{s}"' for s in samples),
        "\t" + "\t".join(f'"{c}"' for c in clusters),
    ]
    lines += [f"{1000 + i}\t" + "\t".join(f"{v:g}" for v in row) for i, row in enumerate(values)]
    path.write_text("\n".join(lines) + "\n")


LEUKEMIA_SAMPLES = ["ALL_1_B-cell", "ALL_2_T-cell", "ALL_3_B-cell", "AML_1", "AML_2"]


def test_load_leukemia_discretises_drops_zero_rows_and_reads_classes(tmp_path):
    values = np.array(
        [
            [20, 20, 3000, 500, 400],  # ones at the floor and the high value
            [400, 500, 450, 420, 380],  # all in the middle band: dropped
            [20, 5000, 300, 20, 20],
            [300, 310, 320, 330, 340],  # dropped
        ]
    )
    write_fake_leukemia(tmp_path / "leukemia", values, LEUKEMIA_SAMPLES)
    data = load_leukemia(tmp_path)
    full = _binarize_by_loops(values, 1 / 7, 5, False, False)
    assert data.raw_shape == (4, 5)
    assert np.array_equal(data.matrix, full[[0, 2]])
    assert data.genes == ("G0_at", "G2_at")
    assert data.samples == tuple(LEUKEMIA_SAMPLES)
    assert data.labels == ("ALL", "ALL", "ALL", "AML", "AML")
    assert data.classes["ALL-B/ALL-T/AML"] == ("ALL-B", "ALL-T", "ALL-B", "AML", "AML")


def test_load_melanoma_shifts_normalises_and_labels_controls(tmp_path):
    rng = np.random.default_rng(5)
    values = np.round(rng.normal(size=(12, 4)), 2)
    values[3] = 0.0  # stays in the band after shifting? checked against the reference below
    samples = ["TC-F027", "UACC-2873", "NilC", "RMS13"]
    write_fake_melanoma(tmp_path / "bittner.txt", values, samples, ["ML2", "ML1", "ML2", "ML2"])
    data = load_melanoma(tmp_path / "bittner.txt")
    full = _binarize_by_loops(values, 0.96, 1.04, True, True)
    keep = full.any(axis=1)
    assert np.array_equal(data.matrix, full[keep])
    assert data.genes == tuple(str(1000 + i) for i in np.flatnonzero(keep))
    assert data.labels == ("melanoma", "melanoma", "control", "control")
    assert data.classes["ML1/ML2"] == ("ML2", "ML1", "ML2", "ML2")


# ---------------------------------------------------------------- the real files


@pytest.mark.data
@needs_data
def test_real_leukemia_is_4806_by_38():
    data = load_leukemia(SHARED)
    assert data.matrix.shape == (4806, 38) and data.raw_shape == (5000, 38)
    assert int(data.matrix.sum()) == 90889  # count documented with the data
    assert data.labels.count("ALL") == 27 and data.labels.count("AML") == 11
    assert data.classes["ALL-B/ALL-T/AML"].count("ALL-T") == 8


@pytest.mark.data
@needs_data
def test_real_melanoma_is_2201_by_38():
    data = load_melanoma(SHARED)
    assert data.matrix.shape == (2201, 38)
    assert int(data.matrix.sum()) == 32205
    assert data.labels.count("control") == 7 and data.labels[-7:] == ("control",) * 7


@pytest.mark.data
@needs_data
def test_real_mnist_selection_matches_the_documented_indices():
    images, labels = load_mnist(SHARED)
    raw = read_idx(SHARED / "mnist" / "t10k-images-idx3-ubyte.gz")
    # First ten test-set indices of digit 0 and of digit 8, as listed in the data README.
    for digit, indices in (
        (0, [3, 10, 13, 25, 28, 55, 69, 71, 101, 126]),
        (8, [61, 84, 110, 128, 134, 146, 177, 179, 181, 184]),
    ):
        block = images[digit * 10 : digit * 10 + 10]
        assert np.array_equal(block, (raw[indices] >= 50).astype(np.int8))
        assert (labels[digit * 10 : digit * 10 + 10] == digit).all()

"""Reading labelled matrices (read_matrix, read_data): formats, labels, headers, bad files."""

from __future__ import annotations

import io
import sys
import time

import numpy as np
import pytest
import scipy.io
import scipy.sparse

from bmfdsl.apps import read_data, read_matrix
from bmfdsl.apps._io import MatrixData, binarize_values, write_labelled
from bmfdsl.errors import InvalidMatrixError, InvalidParameterError


def write(tmp_path, text, name="a.csv"):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("gene,s1,s2\ng1,1,0\ng2,0,1\n", "a.csv"),
        ("gene\ts1\ts2\ng1\t1\t0\ng2\t0\t1\n", "a.tsv"),
        ("gene;s1;s2\ng1;1;0\ng2;0;1\n", "a.csv"),
        ("gene s1 s2\ng1  1 0\ng2 0   1\n", "a.txt"),
        ("gene|s1|s2\ng1|1|0\ng2|0|1\n", "a.dat"),
        ("\ufeffgene,s1,s2\r\ng1,1,0\r\ng2,0,1\r\n", "a.csv"),
    ],
)
def test_delimiters_are_sniffed_and_labels_kept(tmp_path, text, name):
    data = read_data(write(tmp_path, text, name))
    assert data.values.tolist() == [[1, 0], [0, 1]]
    assert data.row_labels == ["g1", "g2"] and data.column_labels == ["s1", "s2"]
    assert data.mask is None


def test_bom_without_header_keeps_the_first_row(tmp_path):
    data = read_data(write(tmp_path, "\ufeff1,0,1\n0,1,1\n"))
    assert data.values.tolist() == [[1, 0, 1], [0, 1, 1]] and data.column_labels is None


def test_pandas_written_frame_reads_back_with_its_labels(tmp_path):
    import pandas as pd

    frame = pd.DataFrame([[1, 0], [0, 1], [1, 1]], index=["r0", "r1", "r2"])
    path = tmp_path / "frame.csv"
    frame.to_csv(path)  # header ",0,1": an empty corner above the row labels
    data = read_data(path)
    assert data.values.tolist() == frame.to_numpy().tolist()
    assert data.row_labels == ["r0", "r1", "r2"] and data.column_labels == ["0", "1"]


@pytest.mark.parametrize(
    ("text", "header", "expected"),
    [
        ("0,1\n1,0\n", None, [[0, 1], [1, 0]]),  # all numeric: data
        ("a,b\n1,0\n", None, [[1, 0]]),  # nothing numeric: header
        ("x,1\n0,1\n", True, [[0, 1]]),
        ("x,1\n0,1\n", False, None),  # forced data row with text in it: error
        ("0,1,2\n1,0,1\n", True, [[1, 0, 1]]),
        ("0,1,2\n1,0,1\n", False, [[0, 1, 2], [1, 0, 1]]),
    ],
)
def test_header_detection_and_override(tmp_path, text, header, expected):
    path = write(tmp_path, text)
    if expected is None:
        with pytest.raises(InvalidMatrixError, match="not a number"):
            read_data(path, header=header, index_col=None)
    else:
        assert read_data(path, header=header).values.tolist() == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x,1\n0,1\n", "mixes numbers and text"),  # one non-numeric cell: not silently a header
        ("0,1,2\n1,0,1\n", "pandas' default column names"),
        ("1,0\n1\n", "ragged"),
        ("h1,h2\n1,a\n0,1\n", "line 2, column 2"),
        ("", "empty"),
        ("a,b\n", "no data rows"),
    ],
)
def test_ambiguous_or_bad_text_is_one_typed_error(tmp_path, text, message):
    with pytest.raises(InvalidMatrixError, match=message):
        read_data(write(tmp_path, text))


def test_missing_cells_give_a_mask_and_survive_binarize(tmp_path):
    data = read_data(write(tmp_path, "1;0;\n;1;0.5\nNA;1;0\n"), binarize=0.5)
    expected_mask = [[True, True, False], [False, True, True], [False, True, True]]
    assert data.mask.tolist() == expected_mask and data.missing == 3
    observed = data.values[data.mask]
    assert observed.tolist() == [1, 0, 1, 1, 1, 0]
    assert np.isnan(data.values[~data.mask]).all()  # never silently 0
    with pytest.raises(InvalidMatrixError, match="3 missing"):
        read_matrix(tmp_path / "a.csv")


def test_nan_in_a_binary_array_is_missing_not_zero():
    data = binarize_values(MatrixData(np.array([[np.nan, 2.0]])), threshold=1)
    assert data.mask.tolist() == [[False, True]]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "0.5", True])
def test_binarize_threshold_must_be_finite(tmp_path, bad):
    with pytest.raises(InvalidParameterError, match="finite"):
        read_data(write(tmp_path, "1,0\n"), binarize=bad)


def test_sparse_inputs_stay_sparse(tmp_path):
    A = scipy.sparse.random(40, 30, density=0.1, format="csr", random_state=0)
    A.data[:] = 1
    npz, mtx = tmp_path / "a.npz", tmp_path / "a.mtx"
    scipy.sparse.save_npz(npz, A)
    scipy.io.mmwrite(str(mtx), A)
    for path in (npz, mtx):
        data = read_data(path, binarize=0.5)
        assert scipy.sparse.issparse(data.values)
        assert (data.values.toarray() == A.toarray()).all()
        np.testing.assert_array_equal(read_matrix(path), A.toarray())


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("a.npz", b"PK\x03\x04 not really a zip", "damaged"),
        ("a.npy", b"\x93NUMPY garbage", "damaged"),
        ("a.mtx", b"%%MatrixMarket nonsense\n", "damaged"),
        ("a.csv", b"\x00" * 4096, "NUL"),
        ("a.csv", b"\xff\xfe1,0\n", "UTF-8"),
        ("a.xlsx", b"x", "unsupported file type"),
    ],
)
def test_binary_junk_and_damaged_files_fail_with_one_error(tmp_path, name, content, message):
    with pytest.raises(InvalidMatrixError, match=message):
        read_data(write(tmp_path, content, name))


def test_a_large_nul_file_fails_without_reading_it_all(tmp_path):
    path = tmp_path / "big.csv"
    with path.open("wb") as handle:
        handle.truncate(256 * 2**20)  # 256 MiB of NUL bytes, sparse on disk
    started = time.perf_counter()
    with pytest.raises(InvalidMatrixError, match="NUL"):
        read_data(path)
    assert time.perf_counter() - started < 5  # reads only the first block


def test_a_field_over_128_kib_is_a_clear_error_not_a_csv_crash(tmp_path):
    path = write(tmp_path, "1," + "1" * 200_000 + "\n0,1\n")
    with pytest.raises(InvalidMatrixError, match="not a number"):
        read_data(path)
    long_label = "g" * 200_000
    data = read_data(write(tmp_path, f"{long_label},1,0\nh,0,1\n"))
    assert data.row_labels[0] == long_label


def test_stdin_text_and_npy(monkeypatch):
    class FakeStdin:
        def __init__(self, raw):
            self.buffer = io.BytesIO(raw)

    monkeypatch.setattr(sys, "stdin", FakeStdin(b"a,b\n1,0\n0,1\n"))
    assert read_data("-").column_labels == ["a", "b"]
    buffer = io.BytesIO()
    np.save(buffer, np.eye(3, dtype=np.int8))
    monkeypatch.setattr(sys, "stdin", FakeStdin(buffer.getvalue()))
    np.testing.assert_array_equal(read_data("-").values, np.eye(3))


def test_write_labelled_round_trips(tmp_path):
    values = np.array([[1, 0], [0, 1], [1, 1]])
    path = write_labelled(
        tmp_path / "U.csv", values, row_labels=["a", "b", "c"], column_labels=["k0", "k1"]
    )
    data = read_data(path)
    assert data.values.tolist() == values.tolist()
    assert data.row_labels == ["a", "b", "c"] and data.column_labels == ["k0", "k1"]

"""Input checks of bmfdsl.validation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from bmfdsl.errors import InvalidMatrixError
from bmfdsl.validation import check_binary_matrix


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.float32, bool])
def test_zero_one_matrices_of_every_dtype_become_int8(dtype):
    A = np.array([[1, 0, 1], [0, 0, 1]], dtype=dtype)
    checked = check_binary_matrix(A)
    assert checked.dtype == np.int8 and checked.flags.c_contiguous
    assert checked.tolist() == [[1, 0, 1], [0, 0, 1]]


def test_contiguous_int8_input_is_not_copied():
    A = np.zeros((1000, 30), dtype=np.int8)
    assert check_binary_matrix(A) is A
    strided = np.zeros((10, 6), dtype=np.int8)[:, ::2]
    assert check_binary_matrix(strided).flags.c_contiguous


@pytest.mark.parametrize(
    ("value", "dtype"), [(-1, np.int8), (2, np.uint8), (7, np.int64), (0.5, np.float64)]
)
def test_other_values_are_counted_and_shown(value, dtype):
    A = np.zeros((4, 5), dtype=dtype)
    A[1, 2] = value
    A[3, 0] = value
    with pytest.raises(InvalidMatrixError, match=rf"found 2 other value\(s\), e\.g\. {value!r}"):
        check_binary_matrix(A)


def test_nan_empty_and_sparse_input():
    with pytest.raises(InvalidMatrixError, match="1 NaN"):
        check_binary_matrix([[1.0, np.nan]])
    with pytest.raises(InvalidMatrixError, match="empty"):
        check_binary_matrix(np.zeros((0, 3), dtype=np.int8))
    sparse = scipy.sparse.csr_matrix(np.eye(3, dtype=np.int64))
    assert check_binary_matrix(sparse).tolist() == np.eye(3, dtype=int).tolist()


@pytest.mark.parametrize(("given", "expected"), [(None, None), ("u", "U"), (" V ", "V")])
def test_check_one_hot_normalises(given, expected):
    from bmfdsl.validation import check_one_hot

    assert check_one_hot(given) == expected


@pytest.mark.parametrize("given", ["W", "", 1, True, ("U",)])
def test_check_one_hot_rejects_other_values(given):
    from bmfdsl.errors import InvalidParameterError
    from bmfdsl.validation import check_one_hot

    with pytest.raises(InvalidParameterError, match="one_hot must be None, 'U' or 'V'"):
        check_one_hot(given)


def test_an_object_array_of_numbers_is_read_as_numbers():
    """A frame of mixed int and bool columns (pandas hands it over as objects) or an array
    built with dtype=object holds numbers: read them; objects that are not numbers stay an
    error."""
    numbers_as_objects = np.array([[1, True, 0], [np.bool_(False), 1.0, np.int64(1)]], dtype=object)
    assert check_binary_matrix(numbers_as_objects).tolist() == [[1, 1, 0], [0, 1, 1]]
    for bad in (np.array([[1, "x"]], dtype=object), np.array([[1, None]], dtype=object)):
        with pytest.raises(InvalidMatrixError, match="non-numbers"):
            check_binary_matrix(bad)

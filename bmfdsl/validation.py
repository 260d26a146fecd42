"""Input checks shared by every entry point; each failure says how to fix it."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidMatrixError, InvalidParameterError

__all__ = [
    "check_backend",
    "check_binary_matrix",
    "check_count",
    "check_flag",
    "check_mapping",
    "check_mask",
    "check_one_hot",
    "check_random_state",
    "check_rank",
    "check_real",
    "check_sparse_binary_matrix",
    "check_sparse_structure",
    "is_sparse",
    "split_masked_array",
]


def is_sparse(A: Any) -> bool:
    """True for a scipy sparse matrix or array (anything else never imports scipy.sparse).

    >>> import scipy.sparse
    >>> is_sparse(scipy.sparse.eye(2)), is_sparse(np.eye(2))
    (True, False)
    """
    if not type(A).__module__.startswith("scipy.sparse"):
        return False
    import scipy.sparse

    return bool(scipy.sparse.issparse(A))


def _numeric_from_objects(array: np.ndarray, name: str) -> np.ndarray:
    """An object array of numbers (a pandas frame of mixed int and bool columns, an array
    built with ``dtype=object``) as a numeric one; ragged rows or non-numbers are an error.

    >>> _numeric_from_objects(np.array([[1, True], [np.bool_(0), 1.0]], dtype=object), "A").dtype
    dtype('float64')
    """
    if array.ndim == 2 and all(isinstance(value, numbers.Real | np.bool_) for value in array.flat):
        return array.astype(np.float64)
    raise InvalidMatrixError(
        f"{name} is not a rectangular numeric array (ragged rows or non-numbers)"
    )


def check_binary_matrix(A: Any, *, name: str = "A") -> np.ndarray:
    """Return ``A`` as a C-contiguous 2-D ``int8`` array of zeros and ones.

    Accepts array-likes and scipy sparse matrices; a sparse one is checked without
    densifying (:func:`check_sparse_binary_matrix`, same errors) and then densified: this is
    for consumers that need dense data. The pipeline keeps sparse input sparse instead
    (:class:`bmfdsl.linalg.SparseMatrix`).

    >>> check_binary_matrix([[1, 0], [True, 1.0]]).tolist()
    [[1, 0], [1, 1]]
    >>> check_binary_matrix([[0, 2]])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidMatrixError: A must contain only 0 and 1; found 1 other value(s), e.g. 2...
    """
    if is_sparse(A):
        return np.ascontiguousarray(check_sparse_binary_matrix(A, name=name).toarray())
    if hasattr(A, "toarray") and callable(A.toarray):  # other sparse-like containers
        A = A.toarray()
    A = _without_pandas_na(A)
    try:
        array = np.asarray(A)
    except (TypeError, ValueError) as exc:  # ragged lists and the like
        raise InvalidMatrixError(f"{name} is not a rectangular numeric array: {exc}") from exc
    if array.dtype == object:
        array = _numeric_from_objects(array, name)
    if array.ndim != 2:
        raise InvalidMatrixError(
            f"{name} must be 2-D (rows x columns); got {array.ndim}-D with shape {array.shape}"
        )
    if array.size == 0:
        raise InvalidMatrixError(f"{name} is empty (shape {array.shape}); give at least 1x1")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise InvalidMatrixError(f"{name} must be numeric 0/1; got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.complexfloating):
        finite = np.isfinite(array)
        if not finite.all():
            count = int((~finite).sum())
            raise InvalidMatrixError(
                f"{name} contains {count} NaN or infinite value(s); "
                "fill or drop them, or mark them missing (factorize(A, r, "
                "mask=M) or np.ma.masked_invalid(A))"
            )
    if array.dtype == bool:
        return np.ascontiguousarray(array, dtype=np.int8)
    # integers: two reductions and no m x n temporary (the common input, int8 from a loader,
    # is large); the mask below is only needed to describe a bad entry
    if np.issubdtype(array.dtype, np.integer) and array.min() >= 0 and array.max() <= 1:
        return np.ascontiguousarray(array, dtype=np.int8)
    bad = (array != 0) & (array != 1)
    if bad.any():
        example = array[bad].flat[0]
        example = example.item() if hasattr(example, "item") else example
        raise InvalidMatrixError(
            f"{name} must contain only 0 and 1; found {int(bad.sum())} other value(s), "
            f"e.g. {example!r}. Binarize it first (e.g. (A >= threshold).astype(int))."
        )
    return np.ascontiguousarray(array, dtype=np.int8)


def check_sparse_binary_matrix(A: Any, *, name: str = "A") -> Any:
    """Return a scipy sparse ``A`` as a canonical ``scipy.sparse.csr_array`` of ``int8`` ones.

    Checked without densifying: the shape, the dtype and the stored values (NaN, infinite or
    anything but 0 and 1 is an error, as for dense input). Duplicate entries are summed first
    (as ``toarray`` would) and explicit zeros dropped, so every stored value is 1 and the
    result is the matrix's pattern. The input is never modified; its index arrays are shared
    when it is already canonical.

    >>> import scipy.sparse
    >>> A = check_sparse_binary_matrix(scipy.sparse.coo_array(([1.0, 0.0], ([0, 1], [1, 0]))))
    >>> A.nnz, A.dtype.name, A.toarray().tolist()
    (1, 'int8', [[0, 1], [0, 0]])
    >>> check_sparse_binary_matrix(scipy.sparse.csr_array([[0, 2]]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidMatrixError: A must contain only 0 and 1; found 1 other value(s), e.g. 2...
    """
    import scipy.sparse

    if not scipy.sparse.issparse(A):
        raise InvalidMatrixError(f"{name} must be a scipy sparse matrix; got {type(A).__name__}")
    if A.ndim != 2:
        raise InvalidMatrixError(
            f"{name} must be 2-D (rows x columns); got {A.ndim}-D with shape {A.shape}"
        )
    shape = (int(A.shape[0]), int(A.shape[1]))
    if 0 in shape:
        raise InvalidMatrixError(f"{name} is empty (shape {shape}); give at least 1x1")
    if not (np.issubdtype(A.dtype, np.number) or A.dtype == bool):
        raise InvalidMatrixError(f"{name} must be numeric 0/1; got dtype {A.dtype}")
    check_sparse_structure(A, name=name)  # before any scipy kernel reads the index arrays
    try:
        csr = A.tocsr()  # the same object when A is CSR already
    except (ValueError, IndexError, TypeError) as exc:  # LIL or DOK whose lists disagree
        raise InvalidMatrixError(f"{name} is a damaged sparse matrix: {exc}") from exc
    if csr is not A:  # LIL and DOK hold indices in Python lists: check what they became
        check_sparse_structure(csr, name=name)
    if not csr.has_canonical_format:
        csr = csr.copy()  # sum_duplicates works in place: never on the caller's matrix
        csr.sum_duplicates()
    values = csr.data
    if np.issubdtype(values.dtype, np.floating) or np.issubdtype(values.dtype, np.complexfloating):
        finite = np.isfinite(values)
        if not finite.all():
            raise InvalidMatrixError(
                f"{name} contains {int((~finite).sum())} NaN or infinite value(s); "
                "fill or drop them, or mark them missing (factorize(A, r, "
                "mask=M) or np.ma.masked_invalid(A))"
            )
    if values.dtype != bool:
        bad = (values != 0) & (values != 1)
        if bad.any():
            example = values[bad][0]
            example = example.item() if hasattr(example, "item") else example
            raise InvalidMatrixError(
                f"{name} must contain only 0 and 1; found {int(bad.sum())} other value(s), "
                f"e.g. {example!r}. Binarize it first (e.g. (A >= threshold).astype(int))."
            )
    indices, indptr = csr.indices, csr.indptr
    stored = values != 0
    if not stored.all():  # explicit zeros: keep the pattern of the ones only
        kept_before = np.concatenate([[0], np.cumsum(stored, dtype=np.int64)])
        indptr = kept_before[indptr].astype(indptr.dtype)
        indices = indices[stored]
    reuse = values.dtype == np.int8 and indices is csr.indices  # int8 ones already
    ones = values if reuse else np.ones(indices.size, dtype=np.int8)
    return scipy.sparse.csr_array((ones, indices, indptr), shape=shape, copy=False)


def check_sparse_structure(A: Any, *, name: str = "A") -> None:
    """Refuse a scipy sparse matrix whose index arrays contradict its shape, in ``O(nnz)``.

    scipy's compiled kernels (``tocsr``, ``toarray``, products) trust the index arrays: an
    index outside the shape, or an ``indptr`` that is not a running count, makes them read or
    write outside memory. Every sparse input is checked here before any kernel touches it:
    CSR, CSC and BSR (what ``check_format(full_check=True)`` checks, without modifying the
    caller's object), COO (every coordinate inside the shape), DIA (one row of data per
    offset) and LIL (as many values as column indices in each row; the column indices are
    checked in the CSR copy, as DOK's).

    >>> import scipy.sparse
    >>> check_sparse_structure(scipy.sparse.eye(2, format="csr"))
    >>> bad = scipy.sparse.csr_array(([1.0], [0], [0, 1]), shape=(1, 2))
    >>> bad.indices[0] = 7  # what a crafted file or a buggy caller can do
    >>> check_sparse_structure(bad)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidMatrixError: A is a damaged sparse CSR matrix: indices holds 7, ...
    """
    layout = str(getattr(A, "format", "")).upper()
    shape = tuple(int(size) for size in A.shape)
    damaged = f"{name} is a damaged sparse {layout} matrix"
    advice = "; rebuild it (e.g. scipy.sparse.csr_array(dense)) or check how it was made"
    if layout == "COO":
        coords = A.coords if hasattr(A, "coords") else (A.row, A.col)
        data = _structure_array(A.data, "data", damaged, advice)
        if len(coords) != len(shape):
            raise InvalidMatrixError(
                f"{damaged}: {len(coords)} coordinate arrays for a {len(shape)}-D shape{advice}"
            )
        for axis, (coordinate, size) in enumerate(zip(coords, shape, strict=True)):
            label = ("row", "col")[axis] if axis < 2 else f"coords[{axis}]"
            coordinate = _index_array(coordinate, label, damaged, advice)
            if coordinate.size != data.size:
                raise InvalidMatrixError(
                    f"{damaged}: {label} has {coordinate.size} entries and data {data.size}{advice}"
                )
            _indices_within(coordinate, size, label, damaged, advice)
        return
    if layout == "DIA":
        offsets = _index_array(A.offsets, "offsets", damaged, advice)
        data = np.asarray(A.data)
        if data.ndim != 2 or data.shape[0] != offsets.size:
            raise InvalidMatrixError(
                f"{damaged}: data must hold one row per offset ({offsets.size}); got shape "
                f"{data.shape}{advice}"
            )
        return
    if layout == "LIL":  # Python lists, converted by a kernel that trusts their lengths
        rows, values = A.rows, A.data
        if len(rows) != shape[0] or len(values) != shape[0]:
            raise InvalidMatrixError(f"{damaged}: rows and data must have {shape[0]} lists{advice}")
        for row, (columns, entries) in enumerate(zip(rows, values, strict=True)):
            if len(columns) != len(entries):
                raise InvalidMatrixError(
                    f"{damaged}: row {row} has {len(columns)} column indices and "
                    f"{len(entries)} values{advice}"
                )
        return
    if layout not in ("CSR", "CSC", "BSR"):
        return
    indptr = _index_array(A.indptr, "indptr", damaged, advice)
    indices = _index_array(A.indices, "indices", damaged, advice)
    data = np.asarray(A.data)
    rows, columns = 1, 1  # block shape
    if layout == "BSR":
        if data.ndim != 3:
            raise InvalidMatrixError(f"{damaged}: data must be 3-D (blocks); got {data.ndim}-D")
        rows, columns = int(data.shape[1]), int(data.shape[2])
        if rows < 1 or columns < 1 or shape[0] % rows or shape[1] % columns:
            raise InvalidMatrixError(
                f"{damaged}: blocks of {rows}x{columns} do not tile the shape {shape}{advice}"
            )
    elif data.ndim != 1:
        raise InvalidMatrixError(f"{damaged}: data must be 1-D; got {data.ndim}-D{advice}")
    major, minor = (shape[0] // rows, shape[1] // columns)
    if layout == "CSC":
        major, minor = minor, major
    if indptr.size != major + 1:
        raise InvalidMatrixError(
            f"{damaged}: indptr has {indptr.size} entries; a {shape[0]}x{shape[1]} {layout} "
            f"matrix needs {major + 1}{advice}"
        )
    if indices.size != data.shape[0]:
        raise InvalidMatrixError(
            f"{damaged}: indices has {indices.size} entries and data {data.shape[0]}{advice}"
        )
    stored = int(indptr[-1])
    if int(indptr[0]) != 0 or not 0 <= stored <= indices.size:
        raise InvalidMatrixError(
            f"{damaged}: indptr must run from 0 to at most {indices.size} (the stored "
            f"entries); it runs from {int(indptr[0])} to {stored}{advice}"
        )
    if indptr.size > 1 and (np.diff(indptr) < 0).any():
        raise InvalidMatrixError(f"{damaged}: indptr decreases somewhere{advice}")
    _indices_within(indices[:stored], minor, "indices", damaged, advice)


def _structure_array(values: Any, label: str, damaged: str, advice: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise InvalidMatrixError(f"{damaged}: {label} must be 1-D; got {array.ndim}-D{advice}")
    return array


def _index_array(values: Any, label: str, damaged: str, advice: str) -> np.ndarray:
    array = _structure_array(values, label, damaged, advice)
    if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        raise InvalidMatrixError(
            f"{damaged}: {label} must hold integers; got dtype {array.dtype}{advice}"
        )
    return array


def _indices_within(indices: np.ndarray, size: int, label: str, damaged: str, advice: str) -> None:
    if not indices.size:
        return
    low, high = int(indices.min()), int(indices.max())
    if low < 0 or high >= size:
        outside = low if low < 0 else high
        raise InvalidMatrixError(
            f"{damaged}: {label} holds {outside}, outside 0..{size - 1}{advice}"
        )


def check_mask(mask: Any, shape: tuple[int, int]) -> np.ndarray:
    """A 0/1 mask of observed entries (1 = observed) with the data's ``shape``, as ``int8``.

    >>> check_mask([[1, 0]], (1, 2)).tolist()
    [[1, 0]]
    """
    try:
        array = np.asarray(mask.toarray() if hasattr(mask, "toarray") else mask, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"mask must be a 0/1 array; got {type(mask).__name__}") from exc
    if array.shape != tuple(shape):
        raise InvalidParameterError(
            f"mask must have the data's shape {tuple(shape)}; got {array.shape}"
        )
    if not np.isin(array, (0, 1)).all():
        raise InvalidParameterError("mask must hold only 0 and 1 (1 = observed, 0 = missing)")
    if not array.any():
        raise InvalidParameterError("mask marks no entry as observed; nothing to factorize")
    return array.astype(np.int8)


def check_rank(rank: Any, shape: tuple[int, int], name: str = "rank") -> int:
    """Return ``rank`` as an int in ``1..min(m, n)``; errors call it ``name`` (the estimator's
    ``n_components``).

    >>> check_rank(2, (3, 4))
    2
    """
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise InvalidParameterError(f"{name} must be a positive integer; got {rank!r}")
    rank = int(rank)
    upper = min(shape)
    if not 1 <= rank <= upper:
        raise InvalidParameterError(
            f"{name} must be between 1 and min(m, n) = {upper} for a {shape[0]}x{shape[1]} "
            f"matrix; got {rank}"
        )
    return rank


def check_one_hot(one_hot: Any) -> str | None:
    """Return the one-hot side as ``None``, ``"U"`` or ``"V"`` (lower case accepted).

    ``"V"`` asks for exactly one 1 in every row of ``V`` (each column of ``A`` in one cluster),
    ``"U"`` the same for the rows of ``U``.

    >>> check_one_hot("v"), check_one_hot(None)
    ('V', None)
    >>> check_one_hot("W")
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidParameterError: one_hot must be None, 'U' or 'V'; got 'W'
    """
    if one_hot is None:
        return None
    if isinstance(one_hot, str) and one_hot.strip().upper() in ("U", "V"):
        return one_hot.strip().upper()
    raise InvalidParameterError(f"one_hot must be None, 'U' or 'V'; got {one_hot!r}")


def check_random_state(random_state: Any) -> np.random.Generator:
    """Turn ``None``, an int seed or a Generator into a ``numpy.random.Generator``.

    >>> bool(check_random_state(0).integers(10) == check_random_state(0).integers(10))
    True
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise InvalidParameterError(
                f"random_state must be None, an int >= 0 or a numpy Generator; got {random_state}"
            )
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(2**31 - 1))
    raise InvalidParameterError(
        f"random_state must be None, an int or a numpy Generator; got {type(random_state)}"
    )


def check_flag(value: Any, name: str) -> bool:
    """``value`` as a bool; only ``True``/``False`` (numpy's too) are accepted.

    A string like ``"no"`` is truthy in Python, so it is refused rather than read as True.

    >>> check_flag(np.bool_(False), "als")
    False
    """
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise InvalidParameterError(f"{name} must be True or False; got {value!r}")


def check_backend(backend: Any) -> None:
    """Accept ``None``, a backend name, a dimod-style sampler (``sample`` + ``parameters``) or
    a structure-aware one (``sample_bmf`` + ``parameters``): the one test of what a backend is.

    >>> check_backend("neal")
    >>> check_backend(42)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidParameterError: backend must be a registered name (see ...; got int 42
    """
    if backend is None or isinstance(backend, str):
        return
    if isinstance(backend, type):
        raise InvalidParameterError(
            f"backend must be a sampler instance; got the class {backend.__name__}: "
            f"instantiate it, e.g. backend={backend.__name__}()"
        )
    solves = callable(getattr(backend, "sample", None)) or callable(
        getattr(backend, "sample_bmf", None)
    )
    if solves and hasattr(backend, "parameters"):
        return
    raise InvalidParameterError(
        "backend must be a registered name (see bmfdsl.list_backends()), a dimod.Sampler or a "
        f"StructuredSampler; got {type(backend).__name__} {backend!r:.40}"
    )


def check_count(value: Any, name: str, *, minimum: int = 1) -> int:
    """``value`` as an int ``>= minimum``: a count (reads, sweeps, replicas, ...).

    ``True`` and ``2.5`` are refused rather than read as 1 and 2.

    >>> check_count(np.int64(3), "sweeps")
    3
    >>> check_count(2.5, "replicas")
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidParameterError: replicas must be an integer >= 1; got 2.5
    """
    if (
        isinstance(value, bool | np.bool_)
        or not isinstance(value, numbers.Integral)
        or value < minimum
    ):
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}; got {value!r:.40}")
    return int(value)


def check_real(
    value: Any, name: str, *, minimum: float = 0.0, strict: bool = False, unit: str = ""
) -> float:
    """``value`` as a finite float ``>= minimum`` (``> minimum`` when ``strict``).

    NaN, infinities, ``True`` and strings are refused: a NaN compares False with any bound
    and would slip through a plain ``value < 0`` check.

    >>> check_real(0.5, "time_limit", strict=True, unit=" seconds")
    0.5
    >>> check_real(float("nan"), "time_limit", strict=True, unit=" seconds")
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidParameterError: time_limit must be a finite number > 0 seconds; got nan
    """
    if (
        isinstance(value, bool | np.bool_)
        or not isinstance(value, numbers.Real)
        or not _is_finite(value)
        or (value <= minimum if strict else value < minimum)
    ):
        bound = f"{'>' if strict else '>='} {minimum:g}{unit}"
        raise InvalidParameterError(f"{name} must be a finite number {bound}; got {value!r:.40}")
    return float(value)


def _is_finite(value: numbers.Real) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond any float, e.g. 10**400
        return False


def _without_pandas_na(A: Any) -> Any:
    """A pandas frame of nullable dtypes (``Int64``, ``boolean``) as floats, ``pd.NA`` as NaN
    (numpy reads such a frame as objects). Anything else is returned as it is."""
    dtypes = getattr(A, "dtypes", None)
    if dtypes is None or not callable(getattr(A, "to_numpy", None)):
        return A
    kinds = dtypes if hasattr(dtypes, "__iter__") else [dtypes]
    if all(isinstance(dtype, np.dtype) for dtype in kinds):  # plain numpy columns
        return A
    try:
        return A.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):  # strings and the like: the checks below say so
        return A


def check_mapping(value: Any, name: str, example: str) -> dict[str, Any]:
    """``value`` as a dict with string keys (``None``: empty); ``example`` shows the form.

    >>> check_mapping(None, "weights", "{'lam': 2.0}")
    {}
    >>> check_mapping("lam=2", "weights", "{'lam': 2.0}")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidParameterError: weights must be a dict of name -> value, ...; got str ...
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise InvalidParameterError(
            f"{name} must be a dict of name -> value, e.g. {example}; "
            f"got {type(value).__name__} {value!r:.40}"
        )
    return dict(value)


def split_masked_array(A: Any, mask: Any) -> tuple[Any, Any]:
    """``(data, mask)`` of an input that may be a numpy masked array, whose mask marks missing
    entries: the data filled with 0 and the mask of observed ones (1 = observed; ``None``
    when nothing is masked). Any other ``A`` comes back with ``mask`` as given, its NaN (or
    infinite) entries where ``mask`` is 0 (missing) read as 0: a missing value may be written
    as NaN, in an array, a list or a data frame (one that ``mask`` calls observed is still
    refused, by the binary check). A masked
    array together with an explicit ``mask`` is an error: neither silently wins.

    >>> data, mask = split_masked_array(np.ma.masked_array([[1, 1]], mask=[[0, 1]]), None)
    >>> data.tolist(), mask.tolist()
    ([[1, 0]], [[1, 0]])
    >>> split_masked_array(np.array([[1.0, np.nan]]), [[1, 0]])[0].tolist()
    [[1.0, 0.0]]
    """
    if not isinstance(A, np.ma.MaskedArray):
        lazy = type(A).__module__.split(".")[0] == "dask"  # np.asarray would compute it
        no_nan = isinstance(A, np.ndarray) and A.dtype.kind != "f"
        if mask is None or is_sparse(A) or lazy or no_nan:
            return A, mask
        values = _without_pandas_na(A)
        try:  # a list or a data frame as the array it gives
            values = np.asarray(values, dtype=np.float64)
            observed = np.asarray(mask)
            unreadable = observed.shape != values.shape
        except (TypeError, ValueError):
            unreadable = True
        if unreadable:
            return A, mask  # check_binary_matrix and check_mask say what is wrong
        missing_values = ~np.isfinite(values) & (observed == 0)
        return (np.where(missing_values, 0.0, values) if missing_values.any() else A), mask
    missing = np.ma.getmaskarray(A)
    if mask is not None:
        raise InvalidParameterError(
            "give missing entries either as a numpy masked array or as mask=, not both"
        )
    return A.filled(0), (~missing).astype(np.int8) if missing.any() else None

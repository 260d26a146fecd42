"""Clustering quality for Table 6: clusters read off V, scored by the adjusted Rand index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.metrics import adjusted_rand_score


def adjusted_rand_index(labels_true: Sequence[Any], labels_pred: Sequence[Any]) -> float:
    """The adjusted Rand index (Hubert and Arabie 1985) of two labelings of the same items.

    scikit-learn's ``adjusted_rand_score`` on the labels read as strings (so a cluster
    ``"0,1"`` and the integer class ``0`` compare as labels, never as numbers). 1 means
    identical partitions, about 0 a chance-level agreement.

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
    as_text = [
        np.asarray(labels, dtype=object).astype(str) for labels in (labels_true, labels_pred)
    ]
    return float(adjusted_rand_score(*as_text))

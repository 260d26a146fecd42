"""Clusters read off a binary factor: the paper's "item j is in cluster k when v_jk = 1"."""

from __future__ import annotations

from typing import Any

import numpy as np


def clusters_from_factor(V: Any) -> list[str]:
    """One cluster label per row of a 0/1 factor: the set of its active components.

    With a one-hot factor (``one_hot="V"`` for the columns of A, ``"U"`` for its rows) this
    is "item j is in cluster k when v_jk = 1", as in the paper; for any other factor every
    distinct row pattern is its own cluster (``"0,2"``), and an all-zero row is ``"-"``.

    >>> clusters_from_factor([[1, 0], [0, 1], [1, 0], [0, 0], [1, 1]])
    ['0', '1', '0', '-', '0,1']
    """
    rows = np.asarray(V, dtype=np.int64)
    return [",".join(str(k) for k in np.flatnonzero(row)) or "-" for row in rows]

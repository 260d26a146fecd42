"""What a structure-aware solver needs to know about a compiled model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["BMFStructure", "OneHotSide"]

OneHotSide = Literal["U", "V"]


@dataclass(frozen=True)
class BMFStructure:
    """The data of a plain BMF model: minimise ``||A - U Vᵀ||²_F`` over 0/1 ``U``, ``V``.

    A model declares this structure when, on every feasible assignment, its energy equals
    ``||A - U Vᵀ||²_F``. ``one_hot`` names the factor whose rows must each hold exactly one 1
    (``"V"``: every column of A joins exactly one cluster), or is ``None``.

    Structure-aware backends solve this directly instead of sampling the flat QUBO.
    """

    A: np.ndarray
    rank: int
    one_hot: OneHotSide | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, n)`` of the data matrix."""
        return (int(self.A.shape[0]), int(self.A.shape[1]))

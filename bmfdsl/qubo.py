"""Lower a declaration to QUBO arrays, linear in the penalty weights.

:class:`QuboTerms` holds one coefficient vector per weight (``""``: the objective) over shared
``(row, col)`` pairs, so ``to_bqm(**weights)`` is a few vector operations and a single
``dimod.BinaryQuadraticModel.from_numpy_vectors`` call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import dimod
import numpy as np

from bmfdsl.expr import PolyArray

__all__ = ["BQM_BYTES_PER_INTERACTION", "BQM_BYTES_PER_VARIABLE", "QuboTerms", "lower"]

#: dimod stores each interaction twice (both neighbours): an index and a bias each way.
BQM_BYTES_PER_INTERACTION = 32
#: a variable's label, its linear bias and its adjacency vector.
BQM_BYTES_PER_VARIABLE = 120
#: samples per chunk when evaluating energies (keeps temporaries near 64 MB)
_EVALUATION_ENTRIES = 8_000_000


@dataclass
class QuboTerms:
    """A QUBO linear in the weights: ``Σ_w weight_w · part_w`` (``w = ""``: weight 1).

    ``row < col`` are unique pairs shared by every part.
    """

    num_variables: int
    row: np.ndarray
    col: np.ndarray
    linear: dict[str, np.ndarray]
    quadratic: dict[str, np.ndarray]
    offset: dict[str, float]

    @property
    def num_interactions(self) -> int:
        """The number of distinct quadratic pairs."""
        return int(self.row.size)

    def combine(self, weights: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray, float]:
        """Linear biases, quadratic biases and offset for one weight setting."""
        factors = {"": 1.0, **weights}
        linear = np.zeros(self.num_variables)
        quadratic = np.zeros(self.row.size)
        offset = 0.0
        for key, factor in factors.items():
            if key in self.linear:
                linear += factor * self.linear[key]
            if key in self.quadratic:
                quadratic += factor * self.quadratic[key]
            offset += factor * self.offset.get(key, 0.0)
        return linear, quadratic, offset

    def to_bqm(self, weights: Mapping[str, float], labels: list[str]) -> dimod.BinaryQuadraticModel:
        """The dimod BQM for one weight setting."""
        linear, quadratic, offset = self.combine(weights)
        return dimod.BinaryQuadraticModel.from_numpy_vectors(
            linear, (self.row, self.col, quadratic), offset, dimod.BINARY, variable_order=labels
        )

    def energies(self, samples: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
        """BQM energies of 0/1 ``samples`` (S x num_variables), in float64."""
        linear, quadratic, offset = self.combine(weights)
        X = np.asarray(samples)
        out = X @ linear + offset
        step = max(1, _EVALUATION_ENTRIES // max(self.row.size, 1))
        for start in range(0, X.shape[0], step):
            block = X[start : start + step]
            pairs = block[:, self.row] & block[:, self.col]
            out[start : start + step] += pairs @ quadratic
        return out


def lower(parts: Mapping[str, list[PolyArray]], num_variables: int) -> QuboTerms:
    """Sum each weight's expressions into QUBO arrays with shared, coalesced pairs."""
    linear: dict[str, np.ndarray] = {}
    offset: dict[str, float] = {}
    codes, owners, values = [], [], []
    keys = list(parts)
    for key_index, key in enumerate(keys):
        lin = np.zeros(num_variables)
        constant = 0.0
        for expression in parts[key]:
            const, _, var, coef = expression.terms
            constant += float(const.sum())
            single = var[:, 1] < 0
            if single.any():
                lin += np.bincount(var[single, 0], weights=coef[single], minlength=num_variables)
            pair = ~single
            if pair.any():
                codes.append(var[pair, 0] * num_variables + var[pair, 1])
                owners.append(np.full(int(pair.sum()), key_index, np.int8))
                values.append(coef[pair])
        linear[key] = lin
        offset[key] = constant
    if codes:
        all_codes = np.concatenate(codes)
        unique, inverse = np.unique(all_codes, return_inverse=True)
        all_owners = np.concatenate(owners)
        all_values = np.concatenate(values)
        quadratic = {
            key: np.bincount(
                inverse[all_owners == k], weights=all_values[all_owners == k], minlength=unique.size
            )
            for k, key in enumerate(keys)
        }
        row, col = np.divmod(unique, num_variables)
    else:
        row = col = np.zeros(0, np.int64)
        quadratic = {key: np.zeros(0) for key in keys}
    return QuboTerms(num_variables, row, col, linear, quadratic, offset)

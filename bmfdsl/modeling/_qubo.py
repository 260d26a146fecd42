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
import scipy.sparse

from bmfdsl.modeling._expr import INDEX, PolyArray

#: dimod stores each interaction twice (both neighbours): an index and a bias each way, in
#: vectors grown by doubling. Measured (glibc ``mallinfo2`` bytes in use after
#: ``from_numpy_vectors``): 131 MiB for 18,000 variables and 2.51 M interactions, 157 MiB for
#: 453,000 variables and 2.25 M interactions; these two constants fit both within 10 %.
BQM_BYTES_PER_INTERACTION = 54
#: a variable's two entries in dimod's label maps, its bias and adjacency header (the label
#: strings themselves are shared with ``CompiledModel.variables``).
BQM_BYTES_PER_VARIABLE = 100
#: coefficients scaled per step when combining the weights' parts
COMBINE_BLOCK = 65_536
#: labels handed to dimod's ``relabel_variables`` per call
RELABEL_CHUNK = 512


@dataclass
class QuboTerms:
    """A QUBO linear in the weights: ``Σ_w weight_w · part_w`` (``w = ""``: weight 1).

    The pairs ``row < col`` are unique, shared by every part and stored in CSR order: row
    ``i``'s columns are ``col[indptr[i]:indptr[i + 1]]``, ascending.
    """

    num_variables: int
    indptr: np.ndarray
    col: np.ndarray
    linear: dict[str, np.ndarray]
    quadratic: dict[str, np.ndarray]
    offset: dict[str, float]

    @property
    def num_interactions(self) -> int:
        """The number of distinct quadratic pairs."""
        return int(self.col.size)

    @property
    def row(self) -> np.ndarray:
        """Each pair's first variable (expanded from ``indptr`` on demand)."""
        return np.repeat(np.arange(self.num_variables, dtype=self.col.dtype), np.diff(self.indptr))

    def combine(self, weights: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray, float]:
        """Linear biases, quadratic biases and offset for one weight setting."""
        factors = {"": 1.0, **weights}
        linear = np.zeros(self.num_variables)
        quadratic = np.zeros(self.col.size)
        offset = 0.0
        for key, factor in factors.items():
            if key in self.linear:
                _accumulate(linear, factor, self.linear[key])
            if key in self.quadratic:
                _accumulate(quadratic, factor, self.quadratic[key])
            offset += factor * self.offset.get(key, 0.0)
        return linear, quadratic, offset

    def to_bqm(self, weights: Mapping[str, float], labels: list[str]) -> dimod.BinaryQuadraticModel:
        """The dimod BQM for one weight setting, labelled ``labels`` (strings)."""
        linear, quadratic, offset = self.combine(weights)
        row = self.row
        bqm = dimod.BinaryQuadraticModel.from_numpy_vectors(
            linear, (row, self.col, quadratic), offset, dimod.BINARY
        )
        del linear, row, quadratic  # copied into the BQM
        # dimod relabels through three label dicts of the mapping's size: in chunks they stay
        # small and in cache (F1 at 300x300 r=5: peak 247 -> 165 MB beyond the arrays with
        # chunks of 16,384, no slower with 512; at 30x38, 4.7 MB with 16,384 and 3.9 MB
        # with 512). The string labels never collide with the integer ones they replace.
        for start in range(0, len(labels), RELABEL_CHUNK):
            chunk = labels[start : start + RELABEL_CHUNK]
            bqm.relabel_variables(dict(enumerate(chunk, start)))
        return bqm

    def energies(self, samples: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
        """BQM energies of 0/1 ``samples`` (S x num_variables), in float64."""
        linear, quadratic, offset = self.combine(weights)
        X = np.asarray(samples, dtype=np.float64).reshape(-1, self.num_variables)
        Q = scipy.sparse.csr_matrix((quadratic, self.col, self.indptr), shape=(X.shape[1],) * 2)
        pairs = np.einsum("sn,sn->s", X, np.asarray((Q @ X.T).T))  # Σ q x_row x_col
        return X @ linear + pairs + offset


def _accumulate(total: np.ndarray, factor: float, part: np.ndarray) -> None:
    """``total += factor * part`` in float64 (even where ``part`` is stored narrower), a
    block at a time: no temporary of ``total``'s size next to the BQM being built."""
    for start in range(0, part.size, COMBINE_BLOCK):
        stop = start + COMBINE_BLOCK
        total[start:stop] += np.multiply(factor, part[start:stop], dtype=np.float64)


def lower(parts: Mapping[str, list[PolyArray]], num_variables: int) -> QuboTerms:
    """Sum each weight's expressions into QUBO arrays with shared, coalesced pairs."""
    linear: dict[str, np.ndarray] = {}
    offset: dict[str, float] = {}
    firsts, seconds, owners, values = [], [], [], []
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
                firsts.append(var[pair, 0])
                seconds.append(var[pair, 1])
                owners.append(np.full(int(pair.sum()), key_index, np.int8))
                values.append(coef[pair])
        linear[key] = lin
        offset[key] = constant
    indptr, col, quadratic = _coalesce(keys, firsts, seconds, owners, values, num_variables)
    return QuboTerms(
        num_variables,
        indptr,
        col,
        {key: narrowest_exact(part) for key, part in linear.items()},
        {key: narrowest_exact(part) for key, part in quadratic.items()},
        offset,
    )


def narrowest_exact(part: np.ndarray) -> np.ndarray:
    """``part`` in the narrowest of float16 and float32 that holds it exactly (small integers,
    halves, ...): the compiled model keeps these vectors for re-weighting, and BMF
    coefficients are nearly always such."""
    for dtype in (np.float16, np.float32):
        with np.errstate(over="ignore"):  # too large for float16: inf, not equal, next
            narrow = part.astype(dtype)
        if np.array_equal(narrow, part):
            return narrow
    return part


def _coalesce(
    keys: list[str],
    firsts: list[np.ndarray],
    seconds: list[np.ndarray],
    owners: list[np.ndarray],
    values: list[np.ndarray],
    num_variables: int,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Merge repeated pairs, one coefficient vector per weight over the same pairs (CSR).

    Each weight's coefficients (zeros elsewhere) go through scipy's COO -> CSR conversion,
    which sums duplicates with a counting sort by row: all of them get the same canonical
    pattern, faster than sorting pair codes.
    """
    if not firsts:
        empty = np.zeros(0, INDEX)
        return np.zeros(num_variables + 1, INDEX), empty, {key: np.zeros(0) for key in keys}
    first, second = np.concatenate(firsts), np.concatenate(seconds)
    owner, value = np.concatenate(owners), np.concatenate(values)
    for parts in (firsts, seconds, owners, values):  # the joined copies replace them
        parts.clear()
    shape = (num_variables, num_variables)
    quadratic: dict[str, np.ndarray] = {}
    pattern: tuple[np.ndarray, np.ndarray] | None = None
    for k, key in enumerate(keys):
        data = np.where(owner == k, value, 0.0)
        matrix = scipy.sparse.coo_matrix((data, (first, second)), shape=shape).tocsr()
        matrix.sum_duplicates()
        if pattern is None:
            pattern = (matrix.indptr, matrix.indices)
        elif not (
            np.array_equal(pattern[0], matrix.indptr) and np.array_equal(pattern[1], matrix.indices)
        ):  # pragma: no cover - scipy keeps explicit zeros; this guards the assumption
            raise RuntimeError("coalescing gave different patterns per weight")
        quadratic[key] = np.asarray(matrix.data, dtype=np.float64)
        del data, matrix  # before the next weight's copies
    assert pattern is not None
    indptr, col = pattern
    used = np.zeros(col.size, dtype=bool)
    for part in quadratic.values():
        used |= part != 0
    if not used.all():  # pairs that cancelled out in every weight are no interaction
        row = np.repeat(np.arange(num_variables), np.diff(indptr))[used]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=num_variables))])
        col = col[used]
        quadratic = {key: part[used] for key, part in quadratic.items()}
    return indptr, col, quadratic

"""The numpy fast path: the registered formulations' BQMs built from index arrays.

Each builder produces exactly the BQM the model script declares through PyQUBO (same labels,
biases and offset; the tests check this on many shapes, ranks and weights), tens of times
faster. Variables are numbered in the paper's order: ``x = [vec(U); vec(V); aux...]`` with
``vec`` stacking columns, so the paper's closed-form Q and P matrices index them directly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bmfdsl.compiled import QuboTerms, VariableLayout
from bmfdsl.structure import OneHotSide

__all__ = ["FAST_BUILDERS", "build_formulation1", "build_formulation2"]

LAM = "lam"
LAM_ONEHOT = "lam_onehot"


class _Terms:
    """Collects linear and quadratic parts keyed by weight name, then freezes to QuboTerms."""

    def __init__(self, num_variables: int) -> None:
        self.num_variables = num_variables
        self.linear: dict[str, np.ndarray] = {}
        self.offset: dict[str, float] = {}
        self._quadratic: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []

    def add_linear(self, key: str, index: np.ndarray, bias: np.ndarray | float) -> None:
        target = self.linear.setdefault(key, np.zeros(self.num_variables))
        np.add.at(target, np.ravel(index), np.broadcast_to(bias, np.shape(index)).ravel())

    def add_quadratic(
        self, key: str, row: np.ndarray, col: np.ndarray, bias: np.ndarray | float
    ) -> None:
        row, col = np.broadcast_arrays(row, col)
        values = np.broadcast_to(np.asarray(bias, dtype=float), row.shape)
        self._quadratic.append((key, row.ravel(), col.ravel(), values.ravel()))

    def add_offset(self, key: str, value: float) -> None:
        self.offset[key] = self.offset.get(key, 0.0) + float(value)

    def freeze(self) -> QuboTerms:
        sizes = [chunk[1].size for chunk in self._quadratic]
        total = int(sum(sizes))
        row = np.concatenate([c[1] for c in self._quadratic]) if total else np.zeros(0, np.int64)
        col = np.concatenate([c[2] for c in self._quadratic]) if total else np.zeros(0, np.int64)
        quadratic: dict[str, np.ndarray] = {}
        start = 0
        for (key, _, _, values), size in zip(self._quadratic, sizes, strict=True):
            part = quadratic.setdefault(key, np.zeros(total))
            part[start : start + size] = values
            start += size
        return QuboTerms(self.num_variables, row, col, self.linear, quadratic, self.offset)


def _factor_indices(m: int, n: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``U[i][k]`` (``k*m + i``) and ``V[j][k]`` (``m*r + k*n + j``)."""
    u_index = np.arange(m * r).reshape(r, m).T
    v_index = m * r + np.arange(n * r).reshape(r, n).T
    return u_index, v_index


def _factor_labels(m: int, n: int, r: int) -> list[str]:
    return [f"U[{i}][{k}]" for k in range(r) for i in range(m)] + [
        f"V[{j}][{k}]" for k in range(r) for j in range(n)
    ]


def _add_one_hot(
    terms: _Terms, layout_rows: np.ndarray, one_hot: OneHotSide | None
) -> dict[str, np.ndarray]:
    """The one-hot penalty ``1 - Σ_k x_k + 2 Σ_{k<l} x_k x_l`` on every row of a factor."""
    if one_hot is None:
        return {}
    rows, r = layout_rows.shape
    terms.add_linear(LAM_ONEHOT, layout_rows, -1.0)
    for k in range(r):
        for l in range(k + 1, r):
            terms.add_quadratic(LAM_ONEHOT, layout_rows[:, k], layout_rows[:, l], 2.0)
    terms.add_offset(LAM_ONEHOT, rows)
    return {f"one_hot_{one_hot}": layout_rows}


def build_formulation1(
    A: np.ndarray, r: int, one_hot: OneHotSide | None
) -> tuple[VariableLayout, QuboTerms]:
    """Formulation 1: ``W[k][i][j]`` at ``(m+n)r + k*mn + j*m + i`` (the paper's ``x``)."""
    m, n = A.shape
    a = A.astype(float)
    u_index, v_index = _factor_indices(m, n, r)
    base = (m + n) * r
    # w_index[k, i, j]
    w_index = base + np.arange(r * m * n).reshape(r, n, m).transpose(0, 2, 1)
    terms = _Terms(base + r * m * n)

    # ||A||² - 2 Σ a_ij w_ijk + Σ_kk' w_ijk w_ijk'  (w² = w on the diagonal)
    terms.add_offset("", a.sum())
    terms.add_linear("", w_index, (1.0 - 2.0 * a)[None])
    for k in range(r):
        for l in range(k + 1, r):
            terms.add_quadratic("", w_index[k], w_index[l], 2.0)

    # lam * f(w_ijk, u_ik, v_jk) = lam (u v - 2 u w - 2 v w + 3 w)
    u_b = u_index.T[:, :, None]  # (r, m, 1)
    v_b = v_index.T[:, None, :]  # (r, 1, n)
    terms.add_quadratic(LAM, u_b, v_b, 1.0)
    terms.add_quadratic(LAM, u_b, w_index, -2.0)
    terms.add_quadratic(LAM, v_b, w_index, -2.0)
    terms.add_linear(LAM, w_index, 3.0)

    one_hot_groups = _add_one_hot(terms, u_index if one_hot == "U" else v_index, one_hot)

    def labels() -> list[str]:
        return _factor_labels(m, n, r) + [
            f"W[{k}][{i}][{j}]" for k in range(r) for j in range(n) for i in range(m)
        ]

    layout = VariableLayout(
        variables=labels(),
        u_index=u_index,
        v_index=v_index,
        product_groups={
            "W": (
                w_index.ravel(),
                np.broadcast_to(u_b, w_index.shape).ravel(),
                np.broadcast_to(v_b, w_index.shape).ravel(),
            )
        },
        one_hot_groups=one_hot_groups,
    )
    return layout, terms.freeze()


def _pair_products(
    terms: _Terms,
    factor_index: np.ndarray,
    aux_index: np.ndarray,
    pairs: list[tuple[int, int]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``lam * f(aux_p, x_k, x_l)`` for every row and pair ``p = (k, l)``; returns (z, a, b)."""
    z_parts, a_parts, b_parts = [], [], []
    for p, (k, l) in enumerate(pairs):
        x_k, x_l, z = factor_index[:, k], factor_index[:, l], aux_index[:, p]
        if k == l:  # f(z, x, x) = x - 4 x z + 3 z since x² = x
            terms.add_linear(LAM, x_k, 1.0)
            terms.add_quadratic(LAM, x_k, z, -4.0)
        else:
            terms.add_quadratic(LAM, x_k, x_l, 1.0)
            terms.add_quadratic(LAM, x_k, z, -2.0)
            terms.add_quadratic(LAM, x_l, z, -2.0)
        terms.add_linear(LAM, z, 3.0)
        z_parts.append(z)
        a_parts.append(x_k)
        b_parts.append(x_l)
    if not pairs:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    # Column-major like the paper's vec: all rows of pair 0, then pair 1, ...
    return np.concatenate(z_parts), np.concatenate(a_parts), np.concatenate(b_parts)


def _build_row_pairs(
    A: np.ndarray, r: int, one_hot: OneHotSide | None, *, reduced: bool
) -> tuple[VariableLayout, QuboTerms]:
    m, n = A.shape
    a = A.astype(float)
    u_index, v_index = _factor_indices(m, n, r)
    if reduced:
        pairs = [(k, l) for k in range(r) for l in range(k + 1, r)]
    else:  # the paper's column (k + l r) holds pair (k, l)
        pairs = [(k, l) for l in range(r) for k in range(r)]
    count = len(pairs)
    base = (m + n) * r
    uu_index = base + np.arange(m * count).reshape(count, m).T  # (m, pairs)
    vv_index = base + m * count + np.arange(n * count).reshape(count, n).T  # (n, pairs)
    terms = _Terms(base + (m + n) * count)

    terms.add_offset("", a.sum())
    if reduced:  # Σ_k (1 - 2 a_ij) u_ik v_jk + 2 Σ_{k<l} ũ ṽ
        for k in range(r):
            terms.add_quadratic("", u_index[:, k, None], v_index[None, :, k], 1.0 - 2.0 * a)
        for p in range(count):
            terms.add_quadratic("", uu_index[:, p, None], vv_index[None, :, p], 2.0)
    else:  # -2 Σ a_ij u_ik v_jk + Σ_kl ũ ṽ
        rows, cols = np.nonzero(A)
        for k in range(r):
            terms.add_quadratic("", u_index[rows, k], v_index[cols, k], -2.0)
        for p in range(count):
            terms.add_quadratic("", uu_index[:, p, None], vv_index[None, :, p], 1.0)

    groups = {
        "UU": _pair_products(terms, u_index, uu_index, pairs),
        "VV": _pair_products(terms, v_index, vv_index, pairs),
    }
    if not pairs:
        groups = {}
    one_hot_groups = _add_one_hot(terms, u_index if one_hot == "U" else v_index, one_hot)

    def labels() -> list[str]:
        return (
            _factor_labels(m, n, r)
            + [f"UU[{i}][{k}][{l}]" for k, l in pairs for i in range(m)]
            + [f"VV[{j}][{k}][{l}]" for k, l in pairs for j in range(n)]
        )

    layout = VariableLayout(
        variables=labels(),
        u_index=u_index,
        v_index=v_index,
        product_groups=groups,
        one_hot_groups=one_hot_groups,
    )
    return layout, terms.freeze()


def build_formulation2(
    A: np.ndarray, r: int, one_hot: OneHotSide | None
) -> tuple[VariableLayout, QuboTerms]:
    """Formulation 2 with all ``r²`` pairs, in the paper's ``y`` order."""
    return _build_row_pairs(A, r, one_hot, reduced=False)


def build_formulation2_reduced(
    A: np.ndarray, r: int, one_hot: OneHotSide | None
) -> tuple[VariableLayout, QuboTerms]:
    """Formulation 2 with auxiliaries only for the pairs ``k < l``."""
    return _build_row_pairs(A, r, one_hot, reduced=True)


FAST_BUILDERS: dict[
    str, Callable[[np.ndarray, int, OneHotSide | None], tuple[VariableLayout, QuboTerms]]
] = {
    "formulation1": build_formulation1,
    "formulation2": build_formulation2,
    "formulation2-reduced": build_formulation2_reduced,
}

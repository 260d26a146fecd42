"""The three products of the BMF family and the (weighted) error of an answer under each.

``"sum"`` is the integer product ``U Vᵀ`` (entries up to ``r``), ``"or"`` the Boolean product
``OR_k u_ik v_jk`` and ``"xor"`` the GF(2) product ``Σ_k u_ik v_jk mod 2``. All three come from
the integer counts ``C = U Vᵀ``: ``C``, ``C > 0`` and ``C mod 2``.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from bmfdsl.errors import InvalidParameterError

Product = Literal["sum", "or", "xor"]
PRODUCTS: tuple[str, ...] = ("sum", "or", "xor")

#: Entries per row chunk of the error (bounds the temporaries whatever the matrix size).
_CHUNK_ENTRIES = 1 << 20


def check_product(product: Any) -> Product:
    """``product`` if it names one of :data:`PRODUCTS`, else an error listing them.

    >>> check_product("or")
    'or'
    """
    if not isinstance(product, str) or product not in PRODUCTS:
        raise InvalidParameterError(
            f"product must be one of {list(PRODUCTS)} (integer sum, Boolean OR, GF(2) XOR); "
            f"got {product!r}"
        )
    return product  # type: ignore[return-value]


def apply_product(counts: np.ndarray, product: str, out: np.ndarray | None = None) -> np.ndarray:
    """The product's values from the non-negative counts ``U Vᵀ`` (any shape, integer or
    float; ``out`` may be ``counts`` itself, to work in place).

    >>> counts = np.array([0, 1, 2, 3])
    >>> apply_product(counts, "or").tolist(), apply_product(counts, "xor").tolist()
    ([0, 1, 1, 1], [0, 1, 0, 1])
    """
    if product == "sum":
        if out is None or out is counts:
            return counts
        out[...] = counts
        return out
    if product == "or":
        return np.minimum(counts, 1, out=out)
    return np.remainder(counts, 2, out=out)


def factor_product(U: Any, V: Any, product: str = "sum") -> np.ndarray:
    """``U Vᵀ`` under ``product`` as an integer matrix (``m x n``: for small matrices).

    >>> U = np.array([[1, 1], [0, 1]]); V = np.array([[1, 1], [1, 0]])
    >>> factor_product(U, V, "sum").tolist(), factor_product(U, V, "or").tolist()
    ([[2, 1], [1, 0]], [[1, 1], [1, 0]])
    >>> factor_product(U, V, "xor").tolist()
    [[0, 1], [1, 0]]
    """
    counts = np.asarray(U, dtype=np.int32) @ np.asarray(V, dtype=np.int32).T
    return apply_product(counts, check_product(product))


def product_squared_error(
    A: Any, U: Any, V: Any, product: str = "sum", weights: np.ndarray | None = None
) -> float:
    """``Σ_ij w_ij (a_ij - (U ∘ V)_ij)²`` under ``product`` (``w`` = 1 without ``weights``),
    in row chunks (no ``m x n`` temporaries).

    For ``"or"`` and ``"xor"`` the product is 0/1, so the error counts (weighted) wrong entries.

    >>> A = np.array([[1, 1], [1, 0]])
    >>> U = np.array([[1, 1], [0, 1]]); V = np.array([[1, 1], [1, 0]])
    >>> product_squared_error(A, U, V, "sum"), product_squared_error(A, U, V, "or")
    (1.0, 0.0)
    >>> product_squared_error(A, U, V, "xor", weights=np.array([[2.0, 1.0], [1.0, 1.0]]))
    2.0
    """
    A = np.asarray(A)
    U = np.asarray(U, dtype=np.int32)
    V_t = np.asarray(V, dtype=np.int32).T
    product = check_product(product)
    step = max(1, _CHUNK_ENTRIES // max(A.shape[1], 1))
    total = 0.0
    for start in range(0, A.shape[0], step):
        rows = slice(start, start + step)
        residual = A[rows].astype(np.int32) - apply_product(U[rows] @ V_t, product)
        squares = residual * residual
        if weights is None:
            total += float(squares.sum(dtype=np.int64))
        else:
            total += float((np.asarray(weights[rows], dtype=np.float64) * squares).sum())
    return total

"""Biclustering: every row of A in exactly one row cluster, every column in one column cluster.

    min ||A - UVᵀ||² + lam Σ_ijk f(w_kij, u_ik, v_jk) + lam_onehot (one-hot rows of U and of V)

Formulation 1 with one-hot rows in both ``U`` and ``V``: ``UVᵀ`` is then a block pattern of
``r`` biclusters (row cluster k with column cluster k). Groups ``one_hot_U`` and ``one_hot_V``
share the weight ``lam_onehot`` (default: lam). Solved by the generic backends.
"""

import numpy as np

from bmfdsl.errors import ModelDefinitionError
from bmfdsl.modeling import ModelBuilder, factor_products, squared_residual

NAME = "bicluster"
DESCRIPTION = "Biclustering: one-hot rows in both U and V (r row/column cluster pairs)"


def build(model: ModelBuilder) -> None:
    """Declare the biclustering model on ``model``."""
    if model.one_hot is not None:
        raise ModelDefinitionError(
            "bicluster makes both U and V one-hot already; pass one_hot=None"
        )
    A = model.A
    U, V, _ = factor_products(model)  # W[k][i][j] = U[i][k] V[j][k] stands in for each u v
    model.minimize(squared_residual(A, U @ V.T), quadratize="products")
    onehot = model.weight("lam_onehot", default="lam")
    model.constrain_one_hot(U, axis=1, group="one_hot_U", weight=onehot)
    model.constrain_one_hot(V, axis=1, group="one_hot_V", weight=onehot)
    model.one_hot_constraint()

    def plain_error(U: np.ndarray, V: np.ndarray) -> np.ndarray:
        product = np.einsum("sik,sjk->sij", U.astype(np.int32), V.astype(np.int32))
        return ((A.astype(np.int32)[None] - product) ** 2).sum(axis=(1, 2))

    model.declare_error(plain_error)

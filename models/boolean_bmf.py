"""Boolean BMF: ``a_ij ≈ OR_k u_ik v_jk`` (the Boolean, not the integer, product).

    min Σ_ij (a_ij - y_ij)² + lam Σ_ijk f(w_kij, u_ik, v_jk) + lam Σ_ij or(y_ij; w_1ij..w_rij)

with ``w_kij = u_ik v_jk`` (Formulation 1's auxiliaries) and ``y_ij = OR_k w_kij`` enforced by
a chain of two-input OR penalties ``x1 + x2 + y + x1 x2 - 2 x1 y - 2 x2 y`` through ``r - 2``
auxiliaries ``Y_chain[i][j][t]`` per entry. Since ``y`` is 0/1 the objective is linear in it:
``Σ a_ij + (1 - 2 a_ij) y_ij``. The error reported is the Boolean residual.
"""

import numpy as np

from bmfdsl.modeling import ModelBuilder, factor_products, squared_residual

NAME = "boolean-bmf"
DESCRIPTION = "Boolean BMF: A ≈ OR_k U[:,k] V[:,k]ᵀ, with OR auxiliaries Y[i][j]"


def build(model: ModelBuilder) -> None:
    """Declare Boolean BMF on ``model``."""
    A = model.A
    _, _, W = factor_products(model)
    Y = model.binary("Y", A.shape)
    model.constrain_or(Y, W, axis=0, group="Y", weight="lam")
    model.minimize(squared_residual(A, Y))
    model.one_hot_constraint()

    def boolean_error(U: np.ndarray, V: np.ndarray) -> np.ndarray:
        product = np.einsum("sik,sjk->sij", U.astype(np.int32), V.astype(np.int32)) > 0
        return (product != A.astype(bool)).sum(axis=(1, 2))

    model.declare_error(boolean_error)

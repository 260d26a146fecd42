"""Formulation 1 of Malik et al. (2021): one auxiliary per product ``w_kij = u_ik v_jk``.

    min ||A||² - 2 Σ_ijk a_ij w_kij + Σ_ijkk' w_kij w_k'ij + lam Σ_ijk f(w_kij, u_ik, v_jk)

with ``f(z, a, b) = ab - 2az - 2bz + 3z``. Variables: ``U[i][k]``, ``V[j][k]`` and the
auxiliaries ``W[k][i][j]`` (= ``u_ik v_jk``): ``(m + n + mn) r`` in all. The optional
one-hot constraint on the rows of V (or U) has its own weight ``lam_onehot`` (default: lam).
"""

from bmfdsl.dsl import ModelBuilder, squared_residual

NAME = "formulation1"
DESCRIPTION = "Malik et al. Formulation 1: auxiliaries W[k][i][j] = U[i][k] V[j][k]"


def build(model: ModelBuilder) -> None:
    """Declare Formulation 1 on ``model``."""
    A, r = model.A, model.rank
    m, n = A.shape
    U, V = model.factors()
    W = model.binary("W", (r, m, n))
    lam = model.weight("lam", default=1.0)  # the paper uses λ = 1
    # W[k][i][j] = U[i][k] V[j][k]: U's column k down the rows, V's across the columns
    model.constrain_product(W, U.T[:, :, None], V.T[:, None, :], group="W", weight=lam)
    # ||A - UVᵀ||² with (UVᵀ)_ij = Σ_k w_kij on the feasible set.
    model.minimize(squared_residual(A, W.sum(axis=0)))
    model.one_hot_constraint()
    model.declare_bmf()

"""Formulation 1 of Malik et al. (2021): one auxiliary per product ``w_kij = u_ik v_jk``.

    min ||A||² - 2 Σ_ijk a_ij w_kij + Σ_ijkk' w_kij w_k'ij + lam Σ_ijk f(w_kij, u_ik, v_jk)

with ``f(z, a, b) = ab - 2az - 2bz + 3z``. Variables: ``U[i][k]``, ``V[j][k]`` and the
auxiliaries ``W[k][i][j]`` (= ``u_ik v_jk``): ``(m + n + mn) r`` in all. The optional
one-hot constraint on the rows of V (or U) has its own weight ``lam_onehot`` (default: lam).
"""

from bmfdsl.modeling import ModelBuilder, quadratized_residual

NAME = "formulation1"
DESCRIPTION = "Malik et al. Formulation 1: auxiliaries W[k][i][j] = U[i][k] V[j][k]"


def build(model: ModelBuilder) -> None:
    """Declare Formulation 1 on ``model``: the residual with the products ``u v`` substituted."""
    quadratized_residual(model, quadratize="products")

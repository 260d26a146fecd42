"""Formulation 1 of Malik et al. (2021): one auxiliary per product ``w_kij = u_ik v_jk``.

    min ||A||² - 2 Σ_ijk a_ij w_kij + Σ_ijkk' w_kij w_k'ij + lam Σ_ijk f(w_kij, u_ik, v_jk)

with ``f(z, a, b) = ab - 2az - 2bz + 3z``. Variables: ``U[i][k]``, ``V[j][k]`` and the
auxiliaries ``W[k][i][j]`` (= ``u_ik v_jk``): ``(m + n + mn) r`` in all. The optional
one-hot constraint on the rows of V (or U) has its own weight ``lam_onehot`` (default: lam).
"""

from typing import Any

from bmfdsl.dsl import ModelBuilder, PolyArray, squared_residual

NAME = "formulation1"
DESCRIPTION = "Malik et al. Formulation 1: auxiliaries W[k][i][j] = U[i][k] V[j][k]"


def products(model: ModelBuilder) -> tuple[PolyArray, PolyArray, PolyArray]:
    """Declare ``U``, ``V`` and the auxiliaries ``W[k][i][j] = U[i][k] V[j][k]`` (group ``W``,
    weight ``lam``); returns ``(U, V, W)``: ``W.sum(axis=0)`` is ``U Vᵀ`` when feasible."""
    A, r = model.A, model.rank
    m, n = A.shape
    U, V = model.factors()
    W = model.binary("W", (r, m, n))
    lam = model.weight("lam", default=1.0)  # the paper uses λ = 1
    # U's column k down the rows, V's across the columns
    model.constrain_product(W, U.T[:, :, None], V.T[:, None, :], group="W", weight=lam)
    return U, V, W


def residual_bmf(model: ModelBuilder, mask: Any = None, weights: Any = None) -> None:
    """Formulation 1 with the (masked, weighted) residual ``Σ w m (a - Σ_k w_kij)²``."""
    _, _, W = products(model)
    model.minimize(squared_residual(model.A, W.sum(axis=0), mask=mask, weights=weights))
    model.one_hot_constraint()
    model.declare_bmf(mask=mask, weights=weights)  # energy == that residual when feasible


def build(model: ModelBuilder) -> None:
    """Declare Formulation 1 on ``model``."""
    residual_bmf(model)

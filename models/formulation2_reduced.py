"""Reduced Formulation 2: auxiliaries only for the pairs ``k < l``.

Since ``u_ik u_ik = u_ik``, the diagonal auxiliaries of Formulation 2 are not needed, and
``ũ_i(kl) ṽ_j(kl)`` is symmetric in ``(k, l)``:

    min ||A||² + Σ_ijk (1 - 2 a_ij) u_ik v_jk + 2 Σ_ij Σ_{k<l} ũ_i(kl) ṽ_j(kl)
        + lam Σ_{i, k<l} f(ũ_i(kl), u_ik, u_il) + lam Σ_{j, k<l} f(ṽ_j(kl), v_jk, v_jl)

Variables: ``U[i][k]``, ``V[j][k]``, ``UU[i][k][l]`` and ``VV[j][k][l]`` for ``k < l`` only:
``(m + n)(r + r(r-1)/2)`` in all (the unused ``k >= l`` labels never appear).
"""

import numpy as np

from bmfdsl.dsl import ModelBuilder, einsum

NAME = "formulation2-reduced"
DESCRIPTION = "Formulation 2 with auxiliaries only for k < l: (m+n)(r + r(r-1)/2) variables"


def build(model: ModelBuilder) -> None:
    """Declare the reduced Formulation 2 on ``model``."""
    A, r = model.A, model.rank
    m, n = A.shape
    U, V = model.factors()
    k, l = np.triu_indices(r, 1)  # the pairs k < l
    UU = model.binary("UU", (m, r, r))[:, k, l]
    VV = model.binary("VV", (n, r, r))[:, k, l]
    lam = model.weight("lam", default=1.0)  # the paper uses λ = 1
    model.constrain_product(UU, U[:, k], U[:, l], group="UU", weight=lam)
    model.constrain_product(VV, V[:, k], V[:, l], group="VV", weight=lam)
    fit = ((1 - 2 * A) * (U @ V.T)).sum() + 2 * einsum("ip,jp->", UU, VV)
    model.minimize(A.sum() + fit)
    model.one_hot_constraint()
    model.declare_bmf()

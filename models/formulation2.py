"""Formulation 2 of Malik et al. (2021): auxiliaries for products within a row of U or V.

    min ||A||² - 2 Σ_ijk a_ij u_ik v_jk + Σ_ij Σ_kk' ũ_i(kk') ṽ_j(kk')
        + lam Σ_ikk' f(ũ_i(kk'), u_ik, u_ik') + lam Σ_jkk' f(ṽ_j(kk'), v_jk, v_jk')

with ``f(z, a, b) = ab - 2az - 2bz + 3z``, over all ``r²`` ordered pairs ``(k, k')`` as in the
paper. Variables: ``U[i][k]``, ``V[j][k]``, ``UU[i][k][l]`` (= ``u_ik u_il``) and
``VV[j][k][l]`` (= ``v_jk v_jl``): ``(m + n)(r + r²)`` in all.
"""

from bmfdsl.modeling import ModelBuilder, einsum

NAME = "formulation2"
DESCRIPTION = "Malik et al. Formulation 2: auxiliaries UU[i][k][l] = U[i][k] U[i][l], same for V"


def build(model: ModelBuilder) -> None:
    """Declare Formulation 2 on ``model``."""
    A, r = model.A, model.rank
    m, n = A.shape
    U, V = model.factors()
    UU = model.binary("UU", (m, r, r))
    VV = model.binary("VV", (n, r, r))
    lam = model.weight("lam", default=1.0)  # the paper uses λ = 1
    model.constrain_product(UU, U[:, :, None], U[:, None, :], group="UU", weight=lam)
    model.constrain_product(VV, V[:, :, None], V[:, None, :], group="VV", weight=lam)
    # ||A||² - 2 <A, UVᵀ> + Σ_ij (Σ_k u_ik v_jk)², the square through the auxiliaries
    model.minimize(A.sum() - 2 * (A * (U @ V.T)).sum() + einsum("ikl,jkl->", UU, VV))
    model.one_hot_constraint()
    model.declare_bmf()

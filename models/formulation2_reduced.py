"""Reduced Formulation 2: auxiliaries only for the pairs ``k < l``.

Since ``u_ik u_ik = u_ik``, the diagonal auxiliaries of Formulation 2 are not needed, and
``ũ_i(kl) ṽ_j(kl)`` is symmetric in ``(k, l)``:

    min ||A||² + Σ_ijk (1 - 2 a_ij) u_ik v_jk + 2 Σ_ij Σ_{k<l} ũ_i(kl) ṽ_j(kl)
        + lam Σ_{i, k<l} f(ũ_i(kl), u_ik, u_il) + lam Σ_{j, k<l} f(ṽ_j(kl), v_jk, v_jl)

Variables: ``U[i][k]``, ``V[j][k]``, ``UU[i][k][l]`` and ``VV[j][k][l]`` for ``k < l`` only:
``(m + n)(r + r(r-1)/2)`` in all (the unused ``k >= l`` labels never appear).
"""

from bmfdsl.dsl import ModelBuilder

NAME = "formulation2-reduced"
DESCRIPTION = "Formulation 2 with auxiliaries only for k < l: (m+n)(r + r(r-1)/2) variables"


def build(model: ModelBuilder) -> None:
    """Declare the reduced Formulation 2 on ``model``."""
    A, r = model.A, model.rank
    m, n = A.shape
    U, V = model.factors()
    UU = model.binary("UU", (m, r, r))
    VV = model.binary("VV", (n, r, r))
    lam = model.weight("lam")
    pairs = [(k, l) for k in range(r) for l in range(k + 1, r)]

    for k, l in pairs:
        for i in range(m):
            model.constrain_product(UU[i][k][l], U[i][k], U[i][l], group="UU", weight=lam)
        for j in range(n):
            model.constrain_product(VV[j][k][l], V[j][k], V[j][l], group="VV", weight=lam)

    fit = int(A.sum())
    for i in range(m):
        for j in range(n):
            for k in range(r):
                fit = fit + (1 - 2 * int(A[i, j])) * U[i][k] * V[j][k]
            for k, l in pairs:
                fit = fit + 2 * UU[i][k][l] * VV[j][k][l]
    model.minimize(fit)
    model.one_hot_constraint()
    model.declare_plain_bmf()

"""Reduced Formulation 2: auxiliaries only for the pairs ``k < l``.

Since ``u_ik u_ik = u_ik``, the diagonal auxiliaries of Formulation 2 are not needed, and
``ũ_i(kl) ṽ_j(kl)`` is symmetric in ``(k, l)``:

    min ||A||² + Σ_ijk (1 - 2 a_ij) u_ik v_jk + 2 Σ_ij Σ_{k<l} ũ_i(kl) ṽ_j(kl)
        + lam Σ_{i, k<l} f(ũ_i(kl), u_ik, u_il) + lam Σ_{j, k<l} f(ṽ_j(kl), v_jk, v_jl)

Variables: ``U[i][k]``, ``V[j][k]``, ``UU[i][k][l]`` and ``VV[j][k][l]`` for ``k < l`` only:
``(m + n)(r + r(r-1)/2)`` in all (the unused ``k >= l`` labels never appear).
"""

from bmfdsl.modeling import ModelBuilder, quadratized_residual

NAME = "formulation2-reduced"
DESCRIPTION = "Formulation 2 with auxiliaries only for k < l: (m+n)(r + r(r-1)/2) variables"


def build(model: ModelBuilder) -> None:
    """Declare the reduced Formulation 2: the residual with the pairs ``u u'``, ``v v'``
    substituted (see :func:`bmfdsl.modeling.quadratized_residual`)."""
    quadratized_residual(model, quadratize="pairs")

"""Boolean BMF: ``a_ij ≈ OR_k u_ik v_jk`` (the Boolean, not the integer, product).

    min Σ_ij c_ij m_ij (a_ij - y_ij)² + lam Σ_ijk f(w_kij, u_ik, v_jk)
        + lam Σ_ij or(y_ij; w_1ij..w_rij)

with ``w_kij = u_ik v_jk`` (Formulation 1's auxiliaries) and ``y_ij = OR_k w_kij`` enforced by
a chain of two-input OR penalties ``x1 + x2 + y + x1 x2 - 2 x1 y - 2 x2 y`` through ``r - 2``
auxiliaries ``Y_chain[i][j][t]`` per entry. Since ``y`` is 0/1 the objective is linear in it:
``Σ a_ij + (1 - 2 a_ij) y_ij``. Only observed entries count when a mask is passed
(``data={"mask": M}``, as ``factorize(mask=...)`` does), each weighted by ``data["weights"]``
when given. The claim ``declare_bmf(product="or")`` lets ``native`` solve it by exact row
updates; the error reported is the Boolean residual.
"""

from bmfdsl.modeling import ModelBuilder, factor_products, squared_residual

NAME = "boolean-bmf"
DESCRIPTION = "Boolean BMF: A ≈ OR_k U[:,k] V[:,k]ᵀ, with OR auxiliaries Y[i][j]"


def build(model: ModelBuilder) -> None:
    """Declare Boolean BMF on ``model``."""
    A = model.A
    mask, entry_weights = model.data.get("mask"), model.data.get("weights")
    _, _, W = factor_products(model)
    Y = model.binary("Y", A.shape)
    model.constrain_or(Y, W, axis=0, group="Y", weight="lam")
    model.minimize(squared_residual(A, Y, mask=mask, entry_weights=entry_weights))
    model.one_hot_constraint()
    model.declare_bmf(mask, entry_weights, product="or")

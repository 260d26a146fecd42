"""XOR BMF: ``a_ij ≈ XOR_k u_ik v_jk`` (the product over GF(2)).

    min Σ_ij c_ij m_ij (a_ij - y_ij)² + lam Σ_ijk f(w_kij, u_ik, v_jk)
        + lam Σ_ij (Σ_k w_kij - y_ij - 2 t_ij)²

with ``w_kij = u_ik v_jk`` (Formulation 1's auxiliaries), ``y_ij`` the parity of the ``w_kij``
and ``t_ij`` half their sum, binary-coded in ``Y_half[i][j][b]`` (``model.constrain_xor``).
Only observed entries count with ``data={"mask": M}``, each weighted by ``data["weights"]``
when given. The claim ``declare_bmf(product="xor")`` lets ``native`` solve it by exact row
updates; the error reported is the number of (weighted) wrong entries of the XOR product.
"""

from bmfdsl.modeling import ModelBuilder, factor_products, squared_residual

NAME = "xor-bmf"
DESCRIPTION = "XOR BMF: A ≈ U Vᵀ over GF(2), with parity auxiliaries Y[i][j]"


def build(model: ModelBuilder) -> None:
    """Declare XOR BMF on ``model``."""
    A = model.A
    mask, entry_weights = model.data.get("mask"), model.data.get("weights")
    _, _, W = factor_products(model)
    Y = model.binary("Y", A.shape)
    model.constrain_xor(Y, W, axis=0, group="Y", weight="lam")
    model.minimize(squared_residual(A, Y, mask=mask, entry_weights=entry_weights))
    model.one_hot_constraint()
    model.declare_bmf(mask, entry_weights, product="xor")

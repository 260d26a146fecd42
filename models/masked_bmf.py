"""Masked BMF (missing data): only observed entries count.

    min Σ_ij m_ij (a_ij - Σ_k w_kij)² + lam Σ_ijk f(w_kij, u_ik, v_jk)

Formulation 1 with the residual restricted to the observed entries ``m_ij = 1`` of the mask
passed as ``compile_model("masked-bmf", A, r, data={"mask": M})`` (``A``'s unobserved entries
are ignored; fill them with 0). Variables as Formulation 1.
"""

from bmfdsl.dsl import ModelBuilder, squared_residual
from bmfdsl.errors import ModelDefinitionError

NAME = "masked-bmf"
DESCRIPTION = "BMF over observed entries only (data={'mask': M}, 1 = observed): missing data"


def build(model: ModelBuilder) -> None:
    """Declare masked BMF on ``model``."""
    if "mask" not in model.data:
        raise ModelDefinitionError(
            "masked-bmf needs the mask of observed entries: compile_model(..., data={'mask': M})"
        )
    A, r = model.A, model.rank
    mask = model.data["mask"]
    m, n = A.shape
    U, V = model.factors()
    W = model.binary("W", (r, m, n))
    lam = model.weight("lam", default=1.0)  # the paper uses λ = 1
    # W[k][i][j] = U[i][k] V[j][k]: U's column k down the rows, V's across the columns
    model.constrain_product(W, U.T[:, :, None], V.T[:, None, :], group="W", weight=lam)
    model.minimize(squared_residual(A, W.sum(axis=0), mask=mask))
    model.one_hot_constraint()
    model.declare_bmf(mask=mask)

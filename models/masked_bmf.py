"""Masked BMF (missing data): only observed entries count.

    min Σ_ij m_ij (a_ij - Σ_k w_kij)² + lam Σ_ijk f(w_kij, u_ik, v_jk)

Formulation 1 with the residual restricted to the observed entries ``m_ij = 1`` of the mask
passed as ``compile_model("masked-bmf", A, r, data={"mask": M})`` (``A``'s unobserved entries
are ignored; fill them with 0). Variables as Formulation 1.
"""

from bmfdsl.errors import ModelDefinitionError
from bmfdsl.modeling import ModelBuilder, quadratized_residual

NAME = "masked-bmf"
DESCRIPTION = "BMF over observed entries only (data={'mask': M}, 1 = observed): missing data"


def build(model: ModelBuilder) -> None:
    """Declare masked BMF on ``model``."""
    if "mask" not in model.data:
        raise ModelDefinitionError(
            "masked-bmf needs the mask of observed entries: compile_model(..., data={'mask': M})"
        )
    quadratized_residual(model, mask=model.data["mask"])  # Formulation 1's products

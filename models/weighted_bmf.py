"""Weighted BMF: a non-negative weight per entry.

    min Σ_ij c_ij (a_ij - Σ_k w_kij)² + lam Σ_ijk f(w_kij, u_ik, v_jk)

Formulation 1 with entry weights ``c_ij >= 0`` passed as
``compile_model("weighted-bmf", A, r, data={"weights": C})`` (e.g. confidence, or a heavier
cost for missing ones than for extra ones). Variables as Formulation 1.
"""

from bmfdsl.errors import ModelDefinitionError
from bmfdsl.modeling import ModelBuilder, quadratized_residual

NAME = "weighted-bmf"
DESCRIPTION = "BMF with a non-negative weight per entry (data={'weights': C})"


def build(model: ModelBuilder) -> None:
    """Declare weighted BMF on ``model``."""
    if "weights" not in model.data:
        raise ModelDefinitionError(
            "weighted-bmf needs entry weights: compile_model(..., data={'weights': C})"
        )
    quadratized_residual(model, entry_weights=model.data["weights"])  # Formulation 1's products

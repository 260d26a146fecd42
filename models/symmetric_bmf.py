"""Symmetric BMF: ``A ≈ U Uᵀ`` with one factor (``A`` square, e.g. a graph's adjacency).

    min Σ_ij c_ij m_ij (a_ij - Σ_k u_ik u_jk)² + lam (product penalties of the pairs u_ik u_jk)

One factor ``U`` (``model.factor()``): decoded samples carry ``V = U``. The quartic residual
gets an auxiliary per product ``u_ik u_jk`` (``i != j``; ``u_ik u_ik = u_ik``), group ``P``,
weight ``lam`` (default 1). ``data={"mask": M}`` / ``data={"weights": C}`` as in
``masked-bmf`` / ``weighted-bmf``. Its claim (``declare_bmf`` on a one-factor model) lets
``native`` solve it by exact row updates, one row at a time (row ``i`` enters row and column
``i`` of ``U Uᵀ``). The error reported is the residual at the decoded ``U``.
"""

from bmfdsl.errors import ModelDefinitionError
from bmfdsl.modeling import ModelBuilder, squared_residual

NAME = "symmetric-bmf"
DESCRIPTION = "Symmetric BMF: A ≈ U Uᵀ, one factor (A square)"


def build(model: ModelBuilder) -> None:
    """Declare symmetric BMF on ``model``."""
    A = model.A
    if A.shape[0] != A.shape[1]:
        raise ModelDefinitionError(f"symmetric-bmf needs a square A; got shape {A.shape}")
    mask, entry_weights = model.data.get("mask"), model.data.get("weights")
    U = model.factor()
    residual = squared_residual(A, U @ U.T, mask=mask, entry_weights=entry_weights)
    model.minimize(residual, quadratize="products")
    model.declare_bmf(mask, entry_weights)

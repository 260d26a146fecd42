"""BMF with at most ``k`` ones in each row of ``U``: every row of A uses at most ``k`` of the
``r`` components (``data={"k": k}``, default 1: a clustering that may leave a row out).

    min Σ_ij c_ij m_ij (a_ij - Σ_k w_kij)² + lam Σ_ijk f(w_kij, u_ik, v_jk)
        + lam_k Σ_i (Σ_k u_ik + s_i - k)²

with Formulation 1's auxiliaries and a binary-coded slack ``s_i`` per row
(``model.constrain_at_most``, group ``at_most``, weight ``lam_k``, default lam). The claim
``declare_bmf(at_most=(k, None))`` lets ``native`` solve it by exact row updates over the
``Σ_{j<=k} C(r, j)`` allowed codes.
"""

from bmfdsl.errors import ModelDefinitionError
from bmfdsl.modeling import ModelBuilder, quadratized_residual

NAME = "at-most-k-bmf"
DESCRIPTION = "BMF with at most k ones per row of U (data={'k': k}, default 1)"


def build(model: ModelBuilder) -> None:
    """Declare at-most-k BMF on ``model``."""
    k = model.data.get("k", 1)
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ModelDefinitionError(
            f"at-most-k-bmf needs data={{'k': k}} with an int k >= 0; got {k!r}"
        )
    mask, entry_weights = model.data.get("mask"), model.data.get("weights")
    quadratized_residual(model, mask=mask, entry_weights=entry_weights)
    assert model.factor_arrays is not None
    U, _ = model.factor_arrays
    if k < model.rank:  # otherwise every row holds: nothing to constrain
        lam_k = model.weight("lam_k", default="lam")
        model.constrain_at_most(U, k, axis=1, group="at_most", weight=lam_k)
    model.declare_bmf(mask, entry_weights, at_most=(k, None))

"""Sparse BMF: Formulation 1 plus an L1 term on the factors, weighted by ``mu``.

    min Σ_ij c_ij m_ij (a_ij - Σ_k w_kij)² + mu (Σ_ik u_ik + Σ_jk v_jk)
        + lam Σ_ijk f(w_kij, u_ik, v_jk)

``mu`` is a model weight (default 0.1): ``to_bqm(mu=...)``, ``solve(..., mu=...)`` and
``factorize(weights={"mu": ...})`` re-weight it without recompiling, and ``native`` reads it at
solve time (the claim ``declare_bmf(l1=mu)``). The error reported is the residual alone;
the energy adds the L1 term. ``data={"mask": M}`` and ``data={"weights": C}`` work as in
``masked-bmf`` and ``weighted-bmf``.
"""

from bmfdsl.modeling import ModelBuilder, quadratized_residual

NAME = "sparse-bmf"
DESCRIPTION = "BMF with an L1 term mu * (ΣU + ΣV) on the factors (weight mu, default 0.1)"


def build(model: ModelBuilder) -> None:
    """Declare sparse BMF on ``model``."""
    mask, entry_weights = model.data.get("mask"), model.data.get("weights")
    quadratized_residual(model, mask=mask, entry_weights=entry_weights)
    assert model.factor_arrays is not None
    U, V = model.factor_arrays
    mu = model.weight("mu", default=0.1)
    model.minimize(mu * (U.sum() + V.sum()))
    model.declare_bmf(mask, entry_weights, l1=mu)

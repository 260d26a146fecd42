"""The natural BMF objective, written as it reads and quadratized by the DSL.

    min Σ_ij m_ij (a_ij - Σ_k u_ik v_jk)²

``(A - U @ V.T) ** 2`` squares a quadratic array: a quartic objective. ``model.minimize``
makes it quadratic the way you choose: ``quadratize="products"`` substitutes one auxiliary
per product ``u_ik v_jk`` (the paper's Formulation 1), ``"pairs"`` one per pair ``u_ik u_il``
and ``v_jk v_jl`` (its reduced Formulation 2). Both give exactly the registered models'
QUBOs, with auxiliaries labelled ``P[t]`` or ``Q[t]``; the registered models declare theirs
first (``factor_products``, ``factor_pairs``) and ``minimize`` keeps them, with the paper's
labels ``W[k][i][j]`` or ``UU[i][k][l]``, ``VV[j][k][l]``.

This file is a model script (``compile_model("examples/quartic_model.py", A, r,
data={"quadratize": "pairs"})``) and, run directly, a demonstration:

    python examples/quartic_model.py
"""

from bmfdsl.modeling import ModelBuilder, squared_residual

NAME = "quartic-bmf"
DESCRIPTION = "Σ m (a - Σ_k u v)² quadratized by products or pairs (data['quadratize'])"


def build(model: ModelBuilder) -> None:
    U, V = model.factors()
    mask = model.data.get("mask")  # optional: only observed entries count
    how = model.data.get("quadratize", "products")
    model.minimize(squared_residual(model.A, U @ V.T, mask=mask), quadratize=how)
    model.one_hot_constraint()
    model.declare_bmf(mask=mask)  # verified by compile_model: 'native' may solve it


if __name__ == "__main__":
    import bmfdsl
    from bmfdsl.apps import make_exact_rank

    A = make_exact_rank(12, 10, 3, random_state=4)
    for how, paper in (("products", "formulation1"), ("pairs", "formulation2-reduced")):
        compiled = bmfdsl.compile_model(__file__, A, 3, data={"quadratize": how})
        registered = bmfdsl.compile_model(paper, A, 3)
        same_size = (compiled.num_variables, compiled.num_interactions) == (
            registered.num_variables,
            registered.num_interactions,
        )
        best = bmfdsl.solve(compiled, "native", seed=0)[0]
        print(
            f"{how:8} {compiled.num_variables:5d} variables, the size of {paper}: {same_size}; "
            f"sufficient weights {compiled.sufficient_weights()}; native error {best.error}"
        )

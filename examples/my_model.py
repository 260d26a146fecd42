"""A user's model script: Formulation 1 with a one-hot constraint on U, written with the DSL.

Copy this file to write your own model. ``build(model)`` declares variables, penalties and the
objective on ``model`` (a :class:`bmfdsl.modeling._dsl.ModelBuilder`) with numpy-style arrays:
indexing, broadcasting, ``sum(axis=...)``, ``@`` and ``einsum`` work elementwise and
vectorized, so the script stays fast on large matrices. ``bmfdsl.compile_model`` runs it once;
``compiled.to_pyqubo()`` shows the same model as a PyQUBO Hamiltonian.
"""

from bmfdsl.modeling import ModelBuilder, squared_residual

NAME = "formulation1-own"


def build(model: ModelBuilder) -> None:
    A, r = model.A, model.rank
    m, n = A.shape
    U, V = model.factors()  # labels U[i][k], V[j][k]
    W = model.binary("W", (r, m, n))  # W[k][i][j] stands for U[i][k] * V[j][k]
    lam = model.weight("lam", default=1.0)  # a penalty weight, tuned at to_bqm time
    # one product constraint per (k, i, j): U's column k down the rows, V's across the columns
    model.constrain_product(W, U.T[:, :, None], V.T[:, None, :], group="W", weight=lam)
    model.minimize(squared_residual(A, W.sum(axis=0)))  # ||A - UVᵀ||² on feasible points
    model.one_hot_constraint()  # honours compile_model(one_hot=...)
    model.declare_bmf()  # a claim compile_model verifies: then 'native' may solve it directly

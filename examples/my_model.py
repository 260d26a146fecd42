"""A user's model script: Formulation 1 with a one-hot constraint on U, written with the DSL.

Copy this file to write your own model. ``build(model)`` declares variables, penalties and the
objective on ``model`` (a :class:`bmfdsl.dsl.ModelBuilder`); ``bmfdsl.compile_model`` compiles
it once through PyQUBO.
"""

from bmfdsl.dsl import ModelBuilder, squared_residual

NAME = "formulation1-own"


def build(model: ModelBuilder) -> None:
    A, r = model.A, model.rank
    m, n = A.shape
    U, V = model.factors()  # labels U[i][k], V[j][k]
    W = model.binary("W", (r, m, n))  # W[k][i][j] stands for U[i][k] * V[j][k]
    lam = model.weight("lam", default=1.0)
    for k in range(r):
        for i in range(m):
            for j in range(n):
                model.constrain_product(W[k][i][j], U[i][k], V[j][k], group="W", weight=lam)
    reconstruction = [[sum(W[k][i][j] for k in range(r)) for j in range(n)] for i in range(m)]
    model.minimize(squared_residual(A, reconstruction))
    model.one_hot_constraint()  # honours compile_model(one_hot=...)
    model.declare_plain_bmf()  # energy == ||A - UV^T||^2 on feasible points: native can solve it

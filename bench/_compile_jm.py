"""Formulations 1 and 2 in JijModeling (imported by the ``jijmodeling`` route only).

``jm`` must be a module global: ``Problem.define`` resolves the decorated function's names
there. The penalty sits in the objective, multiplied by the placeholder ``lam``.
"""

from __future__ import annotations

from typing import Any

import jijmodeling as jm


def _f(z: Any, a: Any, b: Any) -> Any:
    """``f(z, a, b) = ab - 2az - 2bz + 3z`` (0 iff ``z = ab``)."""
    return a * b - 2 * a * z - 2 * b * z + 3 * z


@jm.Problem.define("bmf_formulation1")
def formulation1(problem: jm.DecoratedProblem) -> None:
    A = problem.Float(ndim=2)
    r = problem.Natural()
    lam = problem.Float()
    m, n = A.len_at(0), A.len_at(1)
    U = problem.BinaryVar(shape=(m, r))
    V = problem.BinaryVar(shape=(n, r))
    W = problem.BinaryVar(shape=(r, m, n))
    problem += jm.sum(A[i, j] * A[i, j] for i in m for j in n)
    problem += -2 * jm.sum(A[i, j] * W[k, i, j] for k in r for i in m for j in n)
    problem += jm.sum(W[k, i, j] * W[l, i, j] for i in m for j in n for k in r for l in r)
    problem += lam * jm.sum(_f(W[k, i, j], U[i, k], V[j, k]) for k in r for i in m for j in n)


@jm.Problem.define("bmf_formulation2")
def formulation2(problem: jm.DecoratedProblem) -> None:
    A = problem.Float(ndim=2)
    r = problem.Natural()
    lam = problem.Float()
    m, n = A.len_at(0), A.len_at(1)
    U = problem.BinaryVar(shape=(m, r))
    V = problem.BinaryVar(shape=(n, r))
    UU = problem.BinaryVar(shape=(m, r, r))
    VV = problem.BinaryVar(shape=(n, r, r))
    problem += jm.sum(A[i, j] for i in m for j in n)
    problem += -2 * jm.sum(A[i, j] * U[i, k] * V[j, k] for i in m for j in n for k in r)
    problem += jm.sum(UU[i, k, l] * VV[j, k, l] for i in m for j in n for k in r for l in r)
    problem += lam * jm.sum(_f(UU[i, k, l], U[i, k], U[i, l]) for i in m for k in r for l in r)
    problem += lam * jm.sum(_f(VV[j, k, l], V[j, k], V[j, l]) for j in n for k in r for l in r)


def problem_for(model: str) -> Any:
    """The JijModeling problem of ``model`` (formulation1 or formulation2)."""
    return {"formulation1": formulation1, "formulation2": formulation2}[model]

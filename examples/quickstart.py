"""Quickstart: factorize a small planted 0/1 matrix with local solvers, no account needed.

python examples/quickstart.py
"""

import numpy as np

import bmfdsl
from bmfdsl.apps import make_exact_rank

# A 12 x 10 matrix with an exact rank-3 binary factorization (the paper's generator).
A = make_exact_rank(12, 10, 3, random_state=42)
print("A =\n", A)

# 1. The declarative route: compile Formulation 1 once, solve it with simulated annealing.
compiled = bmfdsl.compile_model("formulation1", A, rank=3)
print(f"\n{compiled}: {compiled.num_variables} binary variables")
best = bmfdsl.solve(compiled, backend="neal", lam=1.0, num_reads=16, seed=0)[0]
print(f"neal on the QUBO: ||A - UV^T||^2 = {best.error}, broken constraints {best.broken}")

# 2. The one-call route: the best local solver plus the ALS polish.
result = bmfdsl.factorize(A, 3, random_state=0)
print("\nU =\n", result.U)
print("V =\n", result.V)
print(
    f"factorize: ||A - UV^T||^2 = {result.error}, relative error {result.relative_error:.4f}, "
    f"{result.info['timings']['total']:.2f} s"
)
assert np.array_equal(result.U.astype(int) @ result.V.T.astype(int), A) == (result.error == 0)

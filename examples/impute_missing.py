"""Missing data: factorize only the observed entries, then predict the held-out ones.

python examples/impute_missing.py
"""

import numpy as np

import bmfdsl
from bmfdsl.apps import make_exact_rank

A = make_exact_rank(40, 30, 3, random_state=7)
rng = np.random.default_rng(0)
observed = (rng.random(A.shape) < 0.7).astype(np.int8)  # 30% of the entries are unknown

# The mask makes the model "masked-bmf": only observed entries count in the objective.
result = bmfdsl.factorize(A, 3, mask=observed, random_state=0)
predicted = (result.reconstruct() > 0).astype(np.int8)
held_out = observed == 0
wrong = int((predicted != A)[held_out].sum())
print(f"error on observed entries: {result.error} (relative {result.relative_error:.4f})")
print(f"held-out entries predicted wrong: {wrong} of {int(held_out.sum())}")

# The same model declared explicitly, on any backend: the mask is data for the script.
compiled = bmfdsl.compile_model("masked-bmf", A * observed, 3, data={"mask": observed})
best = bmfdsl.solve(compiled, "native", seed=0)[0]
print(f"native on masked-bmf: masked error {best.error}, energy {best.energy}")

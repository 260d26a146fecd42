"""Write your own model script and solve it on any backend.

python examples/custom_model.py
"""

from pathlib import Path

import bmfdsl
from bmfdsl.apps import make_exact_rank

A = make_exact_rank(8, 6, 2, random_state=1)
script = Path(__file__).with_name("my_model.py")

compiled = bmfdsl.compile_model(script, A, rank=2, one_hot="U")
print(compiled, "->", compiled.num_variables, "variables, weights", compiled.resolve_weights())

for backend in ("neal", "native"):
    best = bmfdsl.solve(compiled, backend=backend, seed=3)[0]
    print(
        f"{backend:7} error {best.error:3d}  broken {best.broken}  rows of U one-hot: "
        f"{bool((best.U.sum(axis=1) == 1).all())}"
    )

"""The same compiled model on every local solver: change one name.

python examples/swap_solvers.py
"""

import bmfdsl
from bmfdsl.apps import make_exact_rank

A = make_exact_rank(10, 10, 2, random_state=5)
compiled = bmfdsl.compile_model("formulation1", A, rank=2)

for info in bmfdsl.list_backends():
    if not info.available or info.name in {"exact", "dwave-qpu", "dwave-hybrid", "fujitsu-da"}:
        print(f"{info.name:12} skipped ({info.reason or 'needs an account or is too small'})")
        continue
    sampler = bmfdsl.get_backend(info.name)
    params = {"seed": 0} if "seed" in sampler.parameters else {}
    best = bmfdsl.solve(compiled, backend=sampler, lam=1.0, **params)[0]
    print(f"{info.name:12} error {best.error:3d}  energy {best.energy:7.1f}  broken {best.broken}")

"""Tune the penalty weight without recompiling: one compilation, many weights.

python examples/lambda_sweep.py
"""

import bmfdsl
from bmfdsl.apps import make_bernoulli

A = make_bernoulli(12, 10, 0.5, random_state=2)
compiled = bmfdsl.compile_model("formulation1", A, rank=3)
sweep = bmfdsl.sweep_weights(
    compiled, "neal", lam=[0.25, 0.5, 1.0, 2.0, 8.0], num_reads=8, num_sweeps=500, seed=0
)
for setting in sweep.settings:
    print(
        f"lam = {setting.weights['lam']:5.2f}: energy {setting.energy:6.1f}, "
        f"error {setting.error:3d}, broken {setting.broken}, {setting.timings['solve']:.2f} s"
    )
best = sweep.best
print("best feasible setting:", None if best is None else best.weights)

"""Cluster the columns of a 0/1 matrix with the one-hot constraint on V.

Every column j joins exactly one cluster k (v_jk = 1), as in the paper's gene-expression
experiments.

    python examples/clustering_one_hot.py
"""

import numpy as np

import bmfdsl

rng = np.random.default_rng(0)
# Two groups of columns with different row patterns, plus 5% noise.
patterns = (rng.random((40, 2)) < 0.5).astype(int)
labels = np.repeat([0, 1], [7, 5])
A = patterns[:, labels]
A ^= (rng.random(A.shape) < 0.05).astype(int)

result = bmfdsl.factorize(A, 2, one_hot="V", random_state=0)
clusters = result.V.argmax(axis=1)
print("true clusters :", labels)
print("found clusters:", clusters)
print(
    f"relative error {result.relative_error:.3f}; each column in one cluster:",
    bool((result.V.sum(axis=1) == 1).all()),
)

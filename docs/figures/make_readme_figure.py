"""Draw the README's picture of one factorization: docs/figures/factorization.png.

A planted rank-4 matrix with 4% of its cells flipped, its rows and columns shuffled (so the
blocks are hidden in the input), factorized at rank 4; the picture orders rows and columns by
their factor codes and the blocks reappear. Run from the repository root:

    python docs/figures/make_readme_figure.py [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import bmfdsl

OUT = Path(__file__).with_name("factorization.png")


def main(out: Path = OUT) -> Path:
    rng = np.random.default_rng(7)
    A = bmfdsl.make_exact_rank(80, 50, 4, random_state=7).astype(np.int8)
    noise = rng.random(A.shape) < 0.04
    A[noise] = 1 - A[noise]
    A = A[rng.permutation(A.shape[0])][:, rng.permutation(A.shape[1])]
    result = bmfdsl.factorize(A, 4, random_state=0)
    figure = result.plot(A)
    figure.savefig(out, dpi=90)
    return out


if __name__ == "__main__":
    print(main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))

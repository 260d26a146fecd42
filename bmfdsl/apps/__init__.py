"""Applications on top of the pipeline: the command line (:func:`main`), the scikit-learn
estimator (:class:`BinaryMatrixFactorization`), file input (:func:`read_matrix`,
:func:`read_data`), pictures of a factorization (:func:`plot_factorization`,
:func:`plot_factors`; the ``plot`` extra), the data sets and generators of the paper,
clusters from one-hot factors, and the experiments of :mod:`bmfdsl.apps.experiments`.

May import every layer below it; nothing imports it but the package's top level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bmfdsl._lazy import lazy_exports

if TYPE_CHECKING:
    from bmfdsl.apps._cli import main
    from bmfdsl.apps._clusters import clusters_from_factor
    from bmfdsl.apps._datafiles import load_leukemia, load_melanoma, load_mnist
    from bmfdsl.apps._datasets import (
        make_bernoulli,
        make_exact_rank,
        make_planted_blocks,
        make_sparse_planted,
    )
    from bmfdsl.apps._estimator import BinaryMatrixFactorization
    from bmfdsl.apps._io import TwoSidedThreshold, read_data, read_matrix
    from bmfdsl.apps._plots import plot_factorization, plot_factors

__getattr__, __dir__, __all__ = lazy_exports(globals())

"""Building blocks for BMF models: the residual, the paper's auxiliaries, a whole objective.

* :func:`squared_residual` — ``Σ w m (a - x)²`` of an expression array (or of numbers; from
  :mod:`bmfdsl.modeling._residual`);
* :func:`factor_products` — ``U``, ``V`` and ``W[k][i][j] = U[i][k] V[j][k]`` (Formulation 1);
* :func:`factor_pairs` — ``U``, ``V`` and the within-row pairs ``UU``, ``VV`` (reduced
  Formulation 2);
* :func:`quadratized_residual` — the whole (masked, weighted) BMF objective, quadratized with
  either, the one-hot constraint and the structure claim: what the registered formulations run.

They only call the public methods of :class:`~bmfdsl.modeling.ModelBuilder`, so a model
script can do the same by hand; the builder itself never calls them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.modeling._dsl import ModelBuilder
from bmfdsl.modeling._quadratize import QUADRATIZATIONS
from bmfdsl.modeling._residual import renamed_entry_weights, squared_residual


def factor_products(model: ModelBuilder, *, weight: str = "lam") -> tuple[Any, Any, Any]:
    """Declare ``U``, ``V`` and the auxiliaries ``W[k][i][j] = U[i][k] V[j][k]`` (group ``W``,
    penalty weight ``weight``, default 1 as in the paper); returns ``(U, V, W)``, and
    ``W.sum(axis=0)`` is ``U Vᵀ`` on the feasible set.

    >>> import numpy as np
    >>> model = ModelBuilder(np.ones((2, 3)), rank=2)
    >>> U, V, W = factor_products(model)
    >>> W.shape, sorted(model.groups)
    ((2, 2, 3), ['W'])
    """
    A, r = model.A, model.rank
    m, n = A.shape
    U, V = model.factors()
    W = model.binary("W", (r, m, n))
    lam = model.weight(weight, default=1.0)
    # U's column k down the rows, V's across the columns
    model.constrain_product(W, U.T[:, :, None], V.T[:, None, :], group="W", weight=lam)
    return U, V, W


def factor_pairs(model: ModelBuilder, *, weight: str = "lam") -> tuple[Any, Any, Any, Any]:
    """Declare ``U``, ``V`` and the auxiliaries of the pairs within their rows, for ``k < l``:
    ``UU[i][k][l] = U[i][k] U[i][l]`` (group ``UU``) and ``VV[j][k][l] = V[j][k] V[j][l]``
    (group ``VV``), penalty weight ``weight`` (default 1 as in the paper); returns
    ``(U, V, UU, VV)`` with ``UU`` (m x r(r-1)/2) and ``VV`` (n x r(r-1)/2), the pairs in
    ``numpy.triu_indices(r, 1)`` order. The labels with ``k >= l`` are never used.

    >>> import numpy as np
    >>> model = ModelBuilder(np.ones((2, 3)), rank=3)
    >>> U, V, UU, VV = factor_pairs(model)
    >>> UU.shape, VV.shape, sorted(model.groups)
    ((2, 3), (3, 3), ['UU', 'VV'])
    """
    A, r = model.A, model.rank
    m, n = A.shape
    U, V = model.factors()
    lam = model.weight(weight, default=1.0)
    k, l = np.triu_indices(r, 1)
    UU = model.binary("UU", (m, r, r))[:, k, l]
    VV = model.binary("VV", (n, r, r))[:, k, l]
    model.constrain_product(UU, U[:, k], U[:, l], group="UU", weight=lam)
    model.constrain_product(VV, V[:, k], V[:, l], group="VV", weight=lam)
    return U, V, UU, VV


def quadratized_residual(
    model: ModelBuilder,
    *,
    quadratize: str = "products",
    mask: Any = None,
    entry_weights: Any = None,
    weight: str = "lam",
    weights: Any = None,
) -> None:
    """Declare ``min Σ_ij w_ij m_ij (a_ij - Σ_k u_ik v_jk)²`` on ``model``: the quartic
    objective, made quadratic by ``model.minimize(..., quadratize=quadratize)`` with the
    auxiliaries declared here first, under their documented labels:

    * ``"products"``: ``W[k][i][j] = U[i][k] V[j][k]`` (:func:`factor_products`; Malik et
      al.'s Formulation 1);
    * ``"pairs"``: ``UU[i][k][l] = U[i][k] U[i][l]`` and ``VV[j][k][l]`` for ``k < l``
      (:func:`factor_pairs`; their reduced Formulation 2, using
      ``(Σ_k u_k v_k)² = Σ_k u_k v_k + 2 Σ_{k<l} ũ_kl ṽ_kl``).

    ``mask`` (0/1, 1 = observed) and ``entry_weights`` (``w``, non-negative) are per-entry
    data (``weights=`` is the deprecated name of ``entry_weights=``). The penalty weight
    (``weight``, default 1 as in the paper) multiplies
    ``f(z, a, b) = ab - 2az - 2bz + 3z`` in group ``W`` (or ``UU`` and ``VV``). The one-hot
    constraint of ``compile_model(one_hot=...)`` is honoured, and the model claims its
    structure (feasible energy == the objective), which ``compile_model`` verifies.

    >>> import numpy as np
    >>> model = ModelBuilder(np.array([[1, 0], [1, 1]]), rank=2)
    >>> quadratized_residual(model, quadratize="pairs")
    >>> sorted(model.groups), [g.product_indices[0].size for g in model.groups.values()]
    (['UU', 'VV'], [2, 2])
    """
    entry_weights = renamed_entry_weights(entry_weights, weights, "quadratized_residual")
    if quadratize not in QUADRATIZATIONS:
        raise InvalidParameterError(
            f"quadratize must be one of {list(QUADRATIZATIONS)}; got {quadratize!r}"
        )
    declare = factor_products if quadratize == "products" else factor_pairs
    U, V = declare(model, weight=weight)[:2]
    squares = squared_residual(model.A, U @ V.T, mask=mask, entry_weights=entry_weights)
    model.minimize(squares, quadratize=quadratize, weight=weight)  # the declared auxiliaries
    model.one_hot_constraint()
    model.declare_bmf(mask=mask, entry_weights=entry_weights)

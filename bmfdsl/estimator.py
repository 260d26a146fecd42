"""A scikit-learn style estimator around :func:`bmfdsl.factorize`.

It follows scikit-learn's conventions (the constructor only stores parameters; ``fit`` sets
attributes ending in ``_``; ``get_params``/``set_params``; ``random_state``) without importing
scikit-learn, so it works with or without it installed.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidParameterError, NotFittedError, UnknownNameError

__all__ = ["BinaryMatrixFactorization"]


class BinaryMatrixFactorization:
    """Binary matrix factorization ``X ≈ W H`` with 0/1 factors, scikit-learn style.

    ``fit_transform(X)`` returns ``W`` (``n_samples x n_components``, the paper's ``U``);
    ``components_`` is ``H`` (``n_components x n_features``, the paper's ``Vᵀ``).

    Args:
        n_components: the target rank ``r``.
        method, model, backend, one_hot, weights, sample_rows, als: as in
            :func:`bmfdsl.factorize` (``backend=None`` is the best local solver).
        backend_params: extra keyword arguments for the backend (e.g. ``{"time_limit": 1}``).
        random_state: seed for every random choice.

    Attributes:
        components_: ``H``, 0/1 ``int8`` array ``(n_components, n_features)``.
        reconstruction_err_: ``||X - W H||_F`` (Frobenius norm, as in scikit-learn's NMF).
        relative_error_: ``||X - W H||²_F / ||X||²_F`` (the paper's measure).
        factorization_: the full :class:`~bmfdsl.result.Factorization`.
        n_features_in_: number of columns seen in ``fit``.

    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> model = BinaryMatrixFactorization(n_components=2, random_state=0)
    >>> W = model.fit_transform(X)
    >>> int(model.reconstruction_err_), (W @ model.components_ == X).all()
    (0, np.True_)
    """

    def __init__(
        self,
        n_components: int = 2,
        *,
        method: str = "qubo",
        model: str = "formulation1",
        backend: str | None = None,
        one_hot: str | None = None,
        weights: dict[str, float] | None = None,
        sample_rows: int | str | None = None,
        als: bool = True,
        backend_params: dict[str, Any] | None = None,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.method = method
        self.model = model
        self.backend = backend
        self.one_hot = one_hot
        self.weights = weights
        self.sample_rows = sample_rows
        self.als = als
        self.backend_params = backend_params
        self.random_state = random_state

    # -- scikit-learn parameter protocol ---------------------------------------------------
    @classmethod
    def _get_param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return sorted(name for name in signature.parameters if name != "self")

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters (``deep`` is accepted for scikit-learn compatibility)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params: Any) -> BinaryMatrixFactorization:
        """Set constructor parameters; unknown names raise an error listing the valid ones."""
        valid = self._get_param_names()
        for name, value in params.items():
            if name not in valid:
                raise UnknownNameError("parameter", name, valid)
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = inspect.signature(type(self).__init__).parameters
        changed = [
            f"{name}={value!r}"
            for name, value in self.get_params().items()
            if defaults[name].default is not value and defaults[name].default != value
        ]
        return f"{type(self).__name__}({', '.join(changed)})"

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> BinaryMatrixFactorization:
        """Factorize ``X`` (0/1, ``n_samples x n_features``); ``y`` is ignored."""
        self.fit_transform(X)
        return self

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit and return ``W`` (``n_samples x n_components``)."""
        from bmfdsl._factorize import factorize

        if self.backend_params is not None and not isinstance(self.backend_params, dict):
            raise InvalidParameterError("backend_params must be a dict or None")
        result = factorize(
            X,
            self.n_components,
            method=self.method,
            model=self.model,
            backend=self.backend,
            one_hot=self.one_hot,
            weights=self.weights,
            sample_rows=self.sample_rows,
            als=self.als,
            random_state=self.random_state,
            **(self.backend_params or {}),
        )
        self.factorization_ = result
        self.components_ = result.V.T.copy()
        self.reconstruction_err_ = float(np.sqrt(result.error))
        self.relative_error_ = result.relative_error
        self.n_features_in_ = int(result.V.shape[0])
        self.n_components_ = int(result.U.shape[1])
        return result.U

    def _check_fitted(self) -> None:
        if not hasattr(self, "components_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(X) first")

    def transform(self, X: Any) -> np.ndarray:
        """The 0/1 ``W`` minimising ``||X - W H||²_F`` for the fitted ``H`` (exact BLS)."""
        from bmfdsl.bls import solve_bls
        from bmfdsl.validation import check_binary_matrix, check_one_hot

        self._check_fitted()
        X = check_binary_matrix(X, name="X")
        if X.shape[1] != self.n_features_in_:
            raise InvalidParameterError(
                f"X has {X.shape[1]} features, but the model was fitted with {self.n_features_in_}"
            )
        return solve_bls(X, self.components_.T, one_hot=check_one_hot(self.one_hot) == "U")

    def inverse_transform(self, W: Any) -> np.ndarray:
        """The reconstruction ``W H`` (integer counts; 0/1 when the factors do not overlap)."""
        self._check_fitted()
        return np.asarray(W, dtype=np.int64) @ self.components_.astype(np.int64)

"""A scikit-learn estimator around :func:`bmfdsl.factorize`.

:class:`BinaryMatrixFactorization` is a real scikit-learn transformer (``BaseEstimator`` +
``TransformerMixin``): it clones, grid-searches, cross-validates, sits in a ``Pipeline``,
honours ``set_output`` and passes scikit-learn's estimator checks (see
``tests/test_estimator.py`` for the checks it is expected to fail, and why).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import validate_data

from bmfdsl.errors import (
    InvalidMatrixError,
    InvalidParameterError,
    NotFittedError,
    PerformanceWarning,
    warn_caller,
)
from bmfdsl.linalg import is_dask_array
from bmfdsl.registry import check_known_names
from bmfdsl.validation import (
    check_mapping,
    check_mask,
    check_one_hot,
    check_rank,
    is_sparse,
    split_masked_array,
)


class BinaryMatrixFactorization(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Binary matrix factorization ``X ≈ W H`` with 0/1 factors, as a scikit-learn transformer.

    ``fit_transform(X)`` returns ``W`` (``n_samples x n_components``, the paper's ``U``);
    ``components_`` is ``H`` (``n_components x n_features``, the paper's ``Vᵀ``).

    Args:
        n_components: the target rank ``r`` (at most ``min(n_samples, n_features)``).
        method, model, backend, one_hot, weights, sample_rows, als: as in
            :func:`bmfdsl.factorize` (``backend=None`` is the best local solver).
        backend_params: extra keyword arguments for the backend (e.g. ``{"time_limit": 1}``).
        binarize: ``None`` (``X`` must hold only 0 and 1) or a threshold ``t``: entries
            ``>= t`` count as 1 and the rest as 0, in ``fit``, ``transform`` and ``score``.
        random_state: seed for every random choice.
        device: where the full-data BLS and ALS score codes (``fit`` and ``transform``):
            ``"cpu"`` (default), ``"gpu"`` (CuPy, ``bmfdsl[gpu]``) or ``"numpy"``; the same
            answer on each (see :func:`bmfdsl.factorize`).

    Missing data: ``fit``, ``fit_transform``, ``transform`` and ``score`` take ``mask=`` (0/1
    of ``X``'s shape, 1 = observed; in a ``Pipeline``, ``fit(X, step__mask=M)``) or a numpy
    masked array ``X`` (masked = missing), as :func:`bmfdsl.factorize` does; giving both is
    an error. Only observed entries count: ``fit`` factorizes with the masked model,
    ``transform`` picks each row of ``W`` by the error on its observed entries and ``score``
    counts those. ``inverse_transform`` reconstructs every entry.

    Attributes:
        components_: ``H``, 0/1 ``int8`` array ``(n_components, n_features)``.
        reconstruction_err_: ``||X - W H||_F`` (Frobenius norm, as in scikit-learn's NMF).
        relative_error_: ``||X - W H||²_F / ||X||²_F`` (the paper's measure).
        labels_: with ``one_hot="U"``, the cluster of each sample (``argmax`` of its row of
            ``W``); with ``one_hot="V"``, the cluster of each feature. Absent otherwise.
        factorization_: the full :class:`~bmfdsl.result.Factorization`.
        n_features_in_, feature_names_in_: as in every scikit-learn estimator.

    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> model = BinaryMatrixFactorization(n_components=2, random_state=0)
    >>> W = model.fit_transform(X)
    >>> model.reconstruction_err_, bool((W @ model.components_ == X).all()), model.score(X)
    (0.0, True, 0.0)
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
        binarize: float | None = None,
        random_state: Any = None,
        device: str = "cpu",
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
        self.binarize = binarize
        self.random_state = random_state
        self.device = device

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # scipy sparse input stays sparse (see fit_transform)
        tags.input_tags.positive_only = self.binarize is None  # 0/1 only unless binarized
        tags.transformer_tags.preserves_dtype = []  # W is always 0/1 int8
        tags.non_deterministic = self.random_state is None
        return tags

    def set_params(self, **params: Any) -> BinaryMatrixFactorization:
        """Set constructor parameters; an unknown name raises an error listing the valid ones."""
        own = [name for name in params if "__" not in name]  # sub__param: sklearn checks those
        check_known_names(own, self._get_param_names())
        super().set_params(**params)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "components_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(X) first")

    # -- input -----------------------------------------------------------------------------
    def _binary_input(self, X: Any, *, reset: bool) -> Any:
        """``X`` validated as scikit-learn does, then binarized or checked to be 0/1.

        A dense ``int8`` array, or for sparse ``X`` a CSR ``int8`` pattern (never densified,
        except by ``binarize <= 0``, which turns every implicit zero into a 1).
        """
        from bmfdsl.validation import (
            check_binary_matrix,
            check_sparse_binary_matrix,
            check_sparse_structure,
        )

        if is_dask_array(X):  # scikit-learn's input checks load it whole
            warn_caller(
                f"{type(self).__name__} loads a dask array fully into memory "
                f"({X.shape[0]} x {X.shape[1]}); bmfdsl.factorize(X, rank) keeps it out of "
                "core (blockwise, sampled rows), then transform new rows with solve_bls",
                PerformanceWarning,
            )
        if is_sparse(X):  # scikit-learn's checks convert formats: kernels that trust indices
            check_sparse_structure(X, name="X")
            if X.format not in ("csr", "csc", "coo"):  # LIL, DOK: indices in Python lists
                X = X.tocsr()
                check_sparse_structure(X, name="X")
        try:
            X = validate_data(self, X, reset=reset, accept_sparse=("csr", "csc", "coo"))
        except ValueError as exc:  # the same message, as our typed error
            raise InvalidMatrixError(str(exc)) from exc
        sparse = is_sparse(X)
        if sparse:
            X = X.tocsr()
        if self.binarize is not None:
            threshold = self.binarize
            real = isinstance(threshold, numbers.Real) and not isinstance(threshold, bool)
            if not (real and np.isfinite(threshold)):
                raise InvalidParameterError(
                    f"binarize must be None or a finite number; got {threshold!r}"
                )
            if sparse and threshold > 0:  # zeros stay zeros: compare the stored values only
                above = X.tocsr() >= threshold
                return check_sparse_binary_matrix(above, name="X")
            if sparse:
                X = X.toarray()
            return np.ascontiguousarray(np.greater_equal(X, threshold), dtype=np.int8)
        # a positive-only estimator: scikit-learn's checks expect this wording for negatives
        values = X.data if sparse else X
        if values.size and values.min() < 0:
            raise InvalidMatrixError(
                "Negative values in data passed to X: X must hold only 0 and 1; "
                "set binarize=T to count entries >= T as 1."
            )
        try:
            if sparse:
                return check_sparse_binary_matrix(X, name="X")
            return check_binary_matrix(X, name="X")
        except InvalidMatrixError as exc:
            raise InvalidMatrixError(
                f"{exc} Or set binarize=T to count entries >= T as 1."
            ) from exc

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None, mask: Any = None) -> BinaryMatrixFactorization:
        """Factorize ``X`` (``n_samples x n_features``); ``y`` is ignored; ``mask``: 1 =
        observed (see the class docs)."""
        self.fit_transform(X, mask=mask)
        return self

    def fit_transform(self, X: Any, y: Any = None, mask: Any = None) -> np.ndarray:
        """Fit and return ``W`` (``n_samples x n_components``); ``y`` is ignored; ``mask``:
        1 = observed (see the class docs).

        Sparse ``X`` is factorized as sparse (see :func:`bmfdsl.factorize`: it stays sparse
        with ``sample_rows``, and is densified once for the core solve without it); the
        result is the one its dense form gives.
        """
        from bmfdsl.pipeline import factorize

        backend_params = check_mapping(self.backend_params, "backend_params", "{'time_limit': 1}")
        X, mask = split_masked_array(X, mask)
        A = self._binary_input(X, reset=True)
        m, n = A.shape
        if isinstance(self.n_components, int) and self.n_components > min(m, n):
            raise InvalidParameterError(
                f"n_components={self.n_components} must be at most min(n_samples, n_features)"
                f" = {min(m, n)}; X has {m} sample(s) and {n} feature(s)"
            )
        check_rank(self.n_components, (m, n), name="n_components")
        result = factorize(
            A,
            self.n_components,
            method=self.method,
            model=self.model,
            backend=self.backend,
            one_hot=self.one_hot,
            weights=self.weights,
            sample_rows=self.sample_rows,
            als=self.als,
            mask=mask,
            random_state=self.random_state,
            device=self.device,
            **backend_params,
        )
        self.factorization_ = result
        self.components_ = result.V.T.copy()
        self.reconstruction_err_ = float(np.sqrt(result.error))
        self.relative_error_ = result.relative_error
        self.n_components_ = int(result.U.shape[1])
        if self.one_hot == "U":
            self.labels_ = np.argmax(result.U, axis=1)
        elif self.one_hot == "V":
            self.labels_ = np.argmax(result.V, axis=1)
        return result.U

    @property
    def _n_features_out(self) -> int:
        """Output width, for ``get_feature_names_out`` (names ``binarymatrixfactorization0``...)."""
        return int(self.components_.shape[0])

    def _observed_input(self, X: Any, mask: Any) -> tuple[Any, np.ndarray | None]:
        """``X`` checked as in :meth:`_binary_input` and its mask (1 = observed), if any."""
        X, mask = split_masked_array(X, mask)
        A = self._binary_input(X, reset=False)
        return A, None if mask is None else check_mask(mask, A.shape)

    def _solve_w(self, A: Any, observed: np.ndarray | None) -> np.ndarray:
        """The best 0/1 ``W`` for the fitted ``H``: exact BLS (the model's own row update for
        a Boolean or XOR model), on observed entries only."""
        from bmfdsl.solvers import solve_bls

        if self._product != "sum":
            return self._family_rows(A, observed)
        one_hot = check_one_hot(self.one_hot) == "U"
        if observed is None:
            return solve_bls(A, self.components_.T, one_hot=one_hot, device=self.device)
        from bmfdsl.solvers.native import weighted_bls

        dense = A.toarray() if is_sparse(A) else A
        W, _ = weighted_bls(dense, observed, self.components_.T, exactly_one=one_hot)
        return W

    def transform(self, X: Any, mask: Any = None) -> np.ndarray:
        """The 0/1 ``W`` minimising ``||X - W H||²_F`` for the fitted ``H`` (exact BLS; under
        the model's product for a Boolean or XOR model); with ``mask`` (1 = observed) or a
        masked ``X``, the error on observed entries.

        Sparse ``X`` is solved from ``X H``, never densified (unless masked, or the model's
        product is not the integer one).
        """
        self._check_fitted()
        return self._solve_w(*self._observed_input(X, mask))

    @property
    def _product(self) -> str:
        """The fitted model's product: ``"sum"`` (integer), ``"or"`` or ``"xor"``."""
        return str(self.factorization_.info.get("product", "sum"))

    def _family_rows(self, A: Any, observed: np.ndarray | None = None) -> np.ndarray:
        """The best 0/1 rows of ``W`` for the fitted ``H`` under the model's product."""
        from bmfdsl.solvers.native import FamilyProblem, polish_family

        dense = np.asarray(A.toarray() if is_sparse(A) else A, dtype=np.int8)
        rank = self.components_.shape[0]
        side = check_one_hot(self.one_hot)
        problem = FamilyProblem(
            dense,
            rank,
            product=self._product,
            weights=None if observed is None else observed.astype(np.float64),
            limits_u=(1, 1) if side == "U" else None,
            limits_v=(1, 1) if side == "V" else None,
        )
        start = np.zeros((dense.shape[0], rank), np.int8)
        return polish_family(problem, start, self.components_.T, work_limit=0).U

    def inverse_transform(self, X: Any) -> np.ndarray:
        """The reconstruction ``W H`` of ``W = X`` (counts; 0/1 when components don't overlap;
        the model's product, 0/1, for a Boolean or XOR model).

        ``X`` must be 0/1 with ``n_components`` columns (what :meth:`transform` returns).
        """
        from bmfdsl.linalg import factor_product
        from bmfdsl.validation import check_binary_matrix

        self._check_fitted()
        W = check_binary_matrix(X, name="W (the input of inverse_transform)")
        if W.shape[1] != self.components_.shape[0]:
            raise InvalidMatrixError(
                f"inverse_transform takes W with n_components = {self.components_.shape[0]} "
                f"columns (what transform returns); got {W.shape[1]}"
            )
        W = np.asarray(W, dtype=np.int64)
        return factor_product(W, self.components_.T, self._product).astype(np.int64)

    def score(self, X: Any, y: Any = None, mask: Any = None) -> float:
        """Minus the squared reconstruction error ``-||X - W H||²_F`` with ``W = transform(X)``
        (under the model's product: the Boolean error for ``boolean-bmf``; with ``mask`` or a
        masked ``X``: on observed entries only).

        Greater is better, as scikit-learn's model selection expects (like ``KMeans.score``).
        """
        from bmfdsl.linalg import product_squared_error, squared_error, weighted_squared_error

        self._check_fitted()
        A, observed = self._observed_input(X, mask)
        W = self._solve_w(A, observed)
        H = self.components_.T
        weights = None if observed is None else observed.astype(np.float64)
        if self._product != "sum":
            dense = A.toarray() if is_sparse(A) else A
            error = float(product_squared_error(dense, W, H, self._product, weights=weights))
        elif weights is not None:
            dense = A.toarray() if is_sparse(A) else A
            error = float(weighted_squared_error(dense, W, H, weights))
        elif is_sparse(A):  # the error without the dense product
            error = float(squared_error(A, W, H))
        else:
            residual = A.astype(np.int64) - W.astype(np.int64) @ H.T.astype(np.int64)
            error = float(np.square(residual).sum())
        return -error if error else 0.0  # a perfect fit scores 0.0, not -0.0

"""Inequalities ``Σ a x <= b`` between linear expressions, with integer slack variables.

An element's constraint ``L(x) = Σ_t a_t x_t - b <= 0`` (integer ``a``, ``b``) becomes the
equality ``L(x) + s = 0`` with a slack ``s`` in ``0 .. S``, ``S = b - Σ_t min(a_t, 0)`` (the
most ``-L`` can be), and the penalty ``(L(x) + s)²``: 0 exactly when the inequality holds and
``s`` takes up the difference, at least 1 otherwise (it is an integer). ``s`` is encoded in
binary variables with coefficients ``c``:

* ``"binary"`` (log): ``1, 2, 4, ..., 2^(B-2)`` and ``S - (2^(B-1) - 1)``, ``B`` the bit length
  of ``S``: every value of ``0 .. S`` and none above, in ``B`` variables;
* ``"unary"``: ``S`` variables of coefficient 1 (more variables, a smoother landscape).

An element that always holds (``Σ max(a_t, 0) <= b``) gets no penalty; one that never holds
is an error. The sufficient weight of such a group is in :mod:`bmfdsl.modeling._penalty_weights`.

>>> slack_coefficients(np.array([0, 1, 5, 7]), "binary")
array([[0., 0., 0.],
       [1., 0., 0.],
       [1., 2., 2.],
       [1., 2., 4.]])
>>> slack_bits(np.array([[0, 1, 3, 5]]), slack_coefficients(np.array([0, 1, 5, 7]), "binary"))
array([[[0, 0, 0],
        [1, 0, 0],
        [1, 1, 0],
        [1, 0, 1]]], dtype=int8)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bmfdsl.errors import InvalidParameterError, ModelDefinitionError
from bmfdsl.modeling._expr import PolyArray
from bmfdsl.modeling._quadratize import merge_terms

#: How a slack variable is encoded in binary variables.
SLACK_ENCODINGS = ("binary", "unary")


@dataclass(frozen=True)
class InequalityRows:
    """The constraints ``lhs <= 0`` of one declaration, and their slack variables.

    ``lhs`` is 1-D and linear (terms merged); ``slack`` (E x L) are the slack variables'
    indices and ``coefficients`` (E x L) their weights (0: unused).
    """

    lhs: PolyArray
    slack: np.ndarray
    coefficients: np.ndarray

    @property
    def unit_coefficients(self) -> bool:
        """True when every variable's coefficient in ``lhs`` is +1 or -1."""
        return bool((np.abs(self.lhs.terms[3]) == 1).all())

    def gaps(self, X: np.ndarray) -> np.ndarray:
        """``lhs + Σ c s`` per sample and constraint (S x E): 0 where the penalty is 0."""
        values = self.lhs.evaluate(X)
        if self.slack.size:
            values = values + (X[:, self.slack] * self.coefficients).sum(axis=2)
        return values

    def fill(self, X: np.ndarray) -> None:
        """Set the slack variables of ``X`` (S x all variables) to take up each difference
        (clipped: a violated constraint gets slack 0)."""
        if not self.slack.size:
            return
        wanted = np.clip(-np.rint(self.lhs.evaluate(X)), 0, self.coefficients.sum(axis=1))
        X[:, self.slack] = slack_bits(wanted.astype(np.int64), self.coefficients)


def slack_coefficients(spans: np.ndarray, encoding: str) -> np.ndarray:
    """The slack coefficients (E x L, zero-padded) for slacks in ``0 .. spans[e]``."""
    spans = np.asarray(spans, dtype=np.int64)
    if encoding == "unary":
        width = int(spans.max(initial=0))
        return (np.arange(width) < spans[:, None]).astype(float)
    bits = np.array([int(s).bit_length() for s in spans], dtype=np.int64)
    width = int(bits.max(initial=0))
    position = np.arange(width)
    out = np.where(position < bits[:, None] - 1, 2.0**position, 0.0)
    last = bits >= 1
    out[np.flatnonzero(last), bits[last] - 1] = spans[last] - (2 ** (bits[last] - 1) - 1)
    return out


def slack_bits(values: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """The slack variables (S x E x L) that encode ``values`` (S x E) with ``coefficients``.

    Unary: the first ``value`` variables. Binary: the last used bit when ``value`` needs it,
    the rest in binary (see the module doc: every value in range has this representation).
    """
    used = coefficients > 0
    bits = used.sum(axis=1)
    if (coefficients[used] == 1).all():  # unary (or spans of at most 1)
        return (np.arange(coefficients.shape[1]) < values[..., None]).astype(np.int8)
    top = np.where(bits >= 1, 2 ** np.maximum(bits - 1, 0), 0)
    last = coefficients[np.arange(bits.size), np.maximum(bits - 1, 0)].astype(np.int64)
    take_last = (bits >= 1) & (values >= top)
    rest = values - np.where(take_last, last, 0)
    position = np.arange(coefficients.shape[1])
    out = (rest[..., None] >> position) & 1
    out = np.where(position < bits[:, None] - 1, out, 0)
    is_last = position == (bits[:, None] - 1)
    out = np.where(is_last, take_last[..., None], out)
    return out.astype(np.int8)


def plan_inequalities(expression: PolyArray, where: str) -> tuple[PolyArray, np.ndarray]:
    """``(lhs, spans)``: the elements of ``expression <= 0`` that can fail, as a merged 1-D
    linear array, and each one's slack range ``S``.

    Raises :class:`~bmfdsl.errors.ModelDefinitionError` for a quadratic term, a non-integer
    coefficient or constant, or an element that can never hold.
    """
    flat = merge_terms(expression.reshape(-1))
    const, elem, var, coef = flat.terms
    if (var[:, 1] >= 0).any():
        raise ModelDefinitionError(
            f"{where}: an inequality needs linear expressions; this one has a product of two "
            "variables (give the product an auxiliary with model.constrain_product)"
        )
    if not (np.array_equal(coef, np.rint(coef)) and np.array_equal(const, np.rint(const))):
        raise ModelDefinitionError(
            f"{where}: an inequality needs integer coefficients and constants (its slack is an "
            "integer); scale both sides"
        )
    size = flat.size
    lowest = const + np.bincount(elem, weights=np.minimum(coef, 0), minlength=size)
    highest = const + np.bincount(elem, weights=np.maximum(coef, 0), minlength=size)
    never = np.flatnonzero(lowest > 0)
    if never.size:
        raise ModelDefinitionError(
            f"{where}: constraint {int(never[0])} (flat index) can never hold: its left side is "
            f"at least {lowest[never[0]]:g} above its bound"
        )
    can_fail = np.flatnonzero(highest > 0)  # the others always hold: no penalty
    return flat[can_fail], np.rint(-lowest[can_fail]).astype(np.int64)


def check_encoding(encoding: str) -> str:
    """``encoding`` if it is one of :data:`SLACK_ENCODINGS`."""
    if encoding not in SLACK_ENCODINGS:
        raise InvalidParameterError(
            f"slack must be one of {list(SLACK_ENCODINGS)}; got {encoding!r}"
        )
    return encoding

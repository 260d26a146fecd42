"""The modeling DSL: declare a formulation once, with numpy-style arrays of variables.

A model script defines ``build(model)``; ``model`` is a :class:`ModelBuilder` holding the data
(``model.A``, ``model.rank``, ``model.one_hot``, extra arrays in ``model.data``) and the
building blocks. Variables are :class:`~bmfdsl.modeling._expr.PolyArray` objects: index, slice,
transpose, broadcast, ``sum(axis=...)``, ``@`` and :func:`~bmfdsl.modeling.einsum` work as in
numpy, elementwise and vectorized.

* :meth:`ModelBuilder.factors`, :meth:`ModelBuilder.binary` — binary variable arrays
  (:meth:`ModelBuilder.factor`: the one factor of a symmetric model, ``A ≈ U Uᵀ``);
* :meth:`ModelBuilder.weight` — a named weight, tuned at ``to_bqm`` time: a group's penalty
  weight, or a factor of any objective term (``mu * U.sum()``);
* :meth:`ModelBuilder.constrain_product` — ``Z = X * Y`` elementwise, with the paper's
  penalty ``f(z, x, y) = xy - 2xz - 2yz + 3z``;
* :meth:`ModelBuilder.constrain_one_hot`, :meth:`ModelBuilder.constrain_or`,
  :meth:`ModelBuilder.constrain_at_most`, :meth:`ModelBuilder.constrain_at_least`,
  :meth:`ModelBuilder.constrain` (a penalty, or an inequality ``a <= b`` / ``a >= b`` of
  linear arrays) — more constraint groups; every group reports ``broken``;
* :meth:`ModelBuilder.minimize` — the objective (any expression of degree <= 2);
* :meth:`ModelBuilder.declare_bmf` — claim that feasible energies equal a (masked, weighted)
  ``||A - UVᵀ||²``; ``compile_model`` verifies the claim before structured solvers may use it.

A declaration is recorded as index arrays and coefficients, linear in the weights, and handed
over once as a :class:`~bmfdsl.modeling.Declaration`
(:meth:`ModelBuilder.declaration`): the BQM is assembled from it with numpy, and
:meth:`bmfdsl.modeling.CompiledModel.to_pyqubo` emits the same model as a PyQUBO Hamiltonian
(a ``Placeholder`` per weight, a ``Constraint`` per group).

Formulation 1 in full:

>>> import numpy as np
>>> from bmfdsl.modeling import squared_residual
>>> model = ModelBuilder(np.array([[1, 0], [1, 1]]), rank=1)
>>> U, V = model.factors()
>>> W = model.binary("W", (2, 2, 1))                     # W[i][j][k] = U[i][k] V[j][k]
>>> model.constrain_product(W, U[:, None, :], V[None, :, :], group="W", weight=model.weight("lam"))
>>> model.minimize(squared_residual(model.A, W.sum(axis=2)))
>>> model.declare_bmf()
>>> sorted(model.weights), sorted(model.groups), model.space.size
(['lam'], ['W'], 8)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidParameterError, ModelDefinitionError
from bmfdsl.linalg import check_product
from bmfdsl.modeling._declaration import (
    ConstraintGroup,
    Declaration,
    GroupKind,
    StructureClaim,
    SummedTerms,
    WeightSpec,
    equal_penalties,
    or_penalties,
    snapshot_groups,
)
from bmfdsl.modeling._expr import (
    INDEX,
    Inequality,
    PolyArray,
    Squares,
    VariableSpace,
    as_poly,
    stack,
)
from bmfdsl.modeling._inequalities import (
    InequalityRows,
    check_encoding,
    plan_inequalities,
    slack_coefficients,
)
from bmfdsl.modeling._nonnegativity import check_non_negative
from bmfdsl.modeling._operands import WeightedOperand
from bmfdsl.modeling._quadratize import (
    QUADRATIZATIONS,
    declared_auxiliaries,
    distinct_pairs,
    merge_terms,
    pair_objective,
    plan_pairs,
    product_pairs,
    substitute_products,
)
from bmfdsl.modeling._residual import check_entry_array, renamed_entry_weights
from bmfdsl.modeling._structure import OneHotSide, RowLimits
from bmfdsl.modeling._weighted import Weight, weighted


class ModelData(dict[str, Any]):
    """A model's data (``compile_model(..., data={...})``): a dict that notes which keys the
    model asked for (``data[key]``, ``data.get(key)``, ``key in data``; reading it whole, by
    iterating, ``keys()``, ``items()``, ``values()``, ``copy()`` or ``|``, counts as asking for
    every key), so that ``compile_model`` can warn about a key no model read (``{"kk": 2}``
    had left ``k`` at its default in silence).

    >>> data = ModelData({"k": 2, "kk": 3})
    >>> data.get("k"), data.get("mask"), data.unread()
    (2, None, ['kk'])
    >>> _ = dict(data); data.unread()
    []
    """

    def __init__(self, values: Mapping[str, Any]) -> None:
        super().__init__(values)
        self.asked: set[str] = set()  # the keys the model asked for, present or not

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.asked.add(key)
        return super().__contains__(key)

    def _read_whole(self) -> None:
        self.asked.update(super().keys())

    def __iter__(self) -> Iterator[str]:
        self._read_whole()
        return super().__iter__()

    def keys(self) -> Any:
        self._read_whole()
        return super().keys()

    def items(self) -> Any:
        self._read_whole()
        return super().items()

    def values(self) -> Any:
        self._read_whole()
        return super().values()

    def copy(self) -> dict[str, Any]:
        self._read_whole()
        return dict(super().items())

    def key_of(self, value: Any) -> str | None:
        """The key holding ``value`` itself (not a copy), if any; not a read."""
        return next((key for key, item in super().items() if item is value), None)

    def unread(self) -> list[str]:
        """The keys given that the model never asked for, in the order given."""
        return [key for key in dict.__iter__(self) if key not in self.asked]


class ModelBuilder:
    """Collects one model declaration; passed to a model script's ``build(model)``.

    Attributes:
        A: the data matrix (0/1 ``int8``).
        rank: the target rank ``r``.
        one_hot: ``"U"``, ``"V"`` or ``None``: which factor's rows must be one-hot.
        data: extra arrays passed as ``compile_model(..., data={...})`` (read-only mapping).
        space: the model's variables.
    """

    def __init__(
        self,
        A: np.ndarray,
        rank: int,
        one_hot: OneHotSide | None = None,
        data: Mapping[str, Any] | None = None,
        *,
        term_limit: int | None = None,
    ) -> None:
        self.A = np.asarray(A, dtype=np.int8)
        self.rank = int(rank)
        self.one_hot = one_hot
        self.data: ModelData = ModelData(data or {})
        self.space = VariableSpace(term_limit)
        self.objective: PolyArray = as_poly(0.0, self.space)
        self.weighted_objective: dict[str, PolyArray] = {}  # weight name -> its summed terms
        self.weights: dict[str, WeightSpec] = {}
        self.groups: dict[str, ConstraintGroup] = {}
        self.factor_names: tuple[str, str] | None = None
        self.factor_arrays: tuple[PolyArray, PolyArray] | None = None
        self.claim: StructureClaim | None = None
        self.error_function: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
        self._one_hot_declared = False

    # -- variables -------------------------------------------------------------------------
    @property
    def arrays(self) -> dict[str, tuple[int, ...]]:
        """Declared variable arrays: name -> shape."""
        return {name: block.shape for name, block in self.space.blocks.items()}

    def binary(self, name: str, shape: Sequence[int] | int) -> PolyArray:
        """A new array of binary variables labelled ``name[i][j]...``."""
        dims = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        return self.space.allocate(name, dims)

    def factors(self, u_name: str = "U", v_name: str = "V") -> tuple[PolyArray, PolyArray]:
        """Declare the factor matrices ``U`` (m x r) and ``V`` (n x r); returns both arrays."""
        if self.factor_names is not None:
            raise ModelDefinitionError("the factors are declared twice (model.factor/factors)")
        m, n = self.A.shape
        U = self.binary(u_name, (m, self.rank))
        V = self.binary(v_name, (n, self.rank))
        self.factor_names = (u_name, v_name)
        self.factor_arrays = (U, V)
        return U, V

    def factor(self, name: str = "U") -> PolyArray:
        """Declare the one factor ``U`` (m x r) of a symmetric model, ``A ≈ U Uᵀ``.

        ``A`` must be square. There is no ``V``: decoded samples carry ``V = U`` (the same
        values, labelled ``U[i][k]``), and ``compiled.single_factor`` is True.

        >>> import numpy as np
        >>> model = ModelBuilder(np.array([[1, 1], [1, 1]]), rank=1)
        >>> U = model.factor()
        >>> model.minimize(((model.A - U @ U.T) ** 2).sum(), quadratize="products")
        >>> model.arrays
        {'U': (2, 1), 'P': (1,)}
        """
        if self.factor_names is not None:
            raise ModelDefinitionError("the factors are declared twice (model.factor/factors)")
        m, n = self.A.shape
        if m != n:
            raise ModelDefinitionError(
                f"a single-factor model approximates A by U Uᵀ, so A must be square; got "
                f"{m}x{n}: declare U and V with model.factors()"
            )
        U = self.binary(name, (m, self.rank))
        self.factor_names = (name, name)
        self.factor_arrays = (U, U)
        return U

    # -- weights ---------------------------------------------------------------------------
    def weight(self, name: str, default: float | str | None = None) -> Weight:
        """A named weight, fed at ``to_bqm`` time: the ``weight=`` of constraint groups, or a
        factor of any objective term, as a PyQUBO ``Placeholder`` (``mu * U.sum()``).

        ``default=None`` makes the weight required; a string makes it default to another
        weight's value (``weight("lam_onehot", default="lam")``). Re-weighting never
        recompiles; a weight that only multiplies objective terms may be 0.

        >>> import numpy as np
        >>> model = ModelBuilder(np.array([[1, 0], [1, 1]]), rank=1)
        >>> U, V = model.factors()
        >>> mu = model.weight("mu", default=0.5)
        >>> model.minimize(((model.A - U @ V.T) ** 2).sum(), quadratize="products")
        >>> model.minimize(mu * U.sum() + V.sum() * mu)     # an L1 term, weighted
        >>> sorted(model.weighted_objective), sorted(model.weights)
        (['mu'], ['lam', 'mu'])
        """
        if not isinstance(name, str) or not name.isidentifier():
            raise ModelDefinitionError(f"weight names must be identifiers; got {name!r}")
        spec = WeightSpec(name, default)
        known = self.weights.get(name)
        if known is not None and known != spec:
            raise ModelDefinitionError(
                f"weight {name!r} declared twice with different defaults: {known.default!r} "
                f"and {default!r}"
            )
        self.weights[name] = spec
        return Weight(name)

    def _weight_name(self, weight: Any) -> str:
        if isinstance(weight, Weight):
            return weight.name
        if isinstance(weight, str):
            if weight not in self.weights:
                self.weight(weight)
            return weight
        raise ModelDefinitionError(
            "weight must be a name or the handle returned by model.weight(...)"
        )

    def _group(self, name: str, weight: Any, kind: GroupKind) -> ConstraintGroup:
        if not isinstance(name, str) or not name:
            raise ModelDefinitionError(f"a constraint group needs a name; got {name!r}")
        weight_name = self._weight_name(weight)
        group = self.groups.get(name)
        if group is None:
            group = self.groups[name] = ConstraintGroup(name, weight_name, kind, self.space)
        elif group.weight != weight_name or group.kind != kind:
            raise ModelDefinitionError(
                f"constraint group {name!r} mixes weights or kinds "
                f"({group.weight}/{group.kind} vs {weight_name}/{kind})"
            )
        return group

    def _variables(self, value: Any, role: str) -> PolyArray:
        if not isinstance(value, PolyArray):
            raise ModelDefinitionError(
                f"{role} must be model variables (from model.binary(...) or model.factors()); "
                f"got {type(value).__name__}"
            )
        if value.space is not self.space:
            raise ModelDefinitionError(f"{role} belongs to another model")
        return value

    # -- constraints -----------------------------------------------------------------------
    def constrain_product(self, z: Any, a: Any, b: Any, *, group: str, weight: Any) -> None:
        """Enforce ``z = a * b`` elementwise (arrays broadcast) with ``weight * f(z, a, b)``."""
        arrays = [self._variables(x, role) for x, role in ((z, "z"), (a, "a"), (b, "b"))]
        try:
            shape = tuple(np.broadcast_shapes(*(x.shape for x in arrays)))
        except ValueError as exc:
            raise ModelDefinitionError(f"constrain_product: {exc}") from exc
        if arrays[0].shape != shape:
            raise ModelDefinitionError(
                f"constrain_product: z has shape {arrays[0].shape} but a * b has {shape}; "
                "declare one auxiliary per product"
            )
        zi, ai, bi = (
            x.broadcast_to(shape).variable_indices(role)
            for x, role in zip(arrays, ("z", "a", "b"), strict=True)
        )
        target = self._group(group, weight, "product")
        self.space.hold(4 * zi.size, f"product group {group!r}")  # its penalty terms, lowered
        target.triples.append((zi.ravel(), ai.ravel(), bi.ravel()))

    def constrain_one_hot(self, X: Any, *, axis: int = -1, group: str, weight: Any) -> None:
        """Exactly one 1 along ``axis`` of ``X`` (a list of variables is one row)."""
        if isinstance(X, list | tuple):
            X = stack(list(X))
            axis = 0
        X = self._variables(X, "one-hot variables")
        if not -X.ndim <= axis < X.ndim:
            raise ModelDefinitionError(f"axis {axis} is out of range for shape {X.shape}")
        indices = np.moveaxis(X.variable_indices("one-hot variables"), axis, -1)
        rows = indices.reshape(-1, indices.shape[-1])
        count, width = rows.shape
        # the terms one_hot_penalty gives each row when lowered: 3 per variable, 1 per pair
        self.space.hold(count * (3 * width + width * (width - 1) // 2), f"one-hot group {group!r}")
        self._group(group, weight, "one_hot").rows.append(rows)

    def one_hot_constraint(self, weight: str = "lam_onehot", default: float | str = "lam") -> None:
        """Add the one-hot constraint requested by ``compile_model(one_hot=...)``, if any.

        Every row of the chosen factor (``V`` by default in the paper) must hold exactly one
        1. The group is named ``one_hot_V`` (or ``one_hot_U``); its weight defaults to ``lam``.
        Does nothing when no one-hot constraint was requested.
        """
        self._one_hot_declared = True
        if self.one_hot is None:
            return
        if self.factor_arrays is None:
            raise ModelDefinitionError("declare model.factors() before model.one_hot_constraint()")
        self.weight(weight, default)
        factor = self.factor_arrays[0 if self.one_hot == "U" else 1]
        self.constrain_one_hot(factor, axis=1, group=f"one_hot_{self.one_hot}", weight=weight)

    def _reduction_operands(
        self, Y: Any, X: Any, axis: int, caller: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """The indices of ``Y`` (flat) and of ``X`` with ``axis`` last, one row per element of
        ``Y``: the operands of an elementwise reduction ``Y = op(X along axis)``."""
        X = self._variables(X, "X")
        if not -X.ndim <= axis < X.ndim:
            raise ModelDefinitionError(f"axis {axis} is out of range for shape {X.shape}")
        inputs = np.moveaxis(X.variable_indices("X"), axis, -1)
        if inputs.shape[:-1] != Y.shape:
            raise ModelDefinitionError(
                f"{caller}: Y has shape {Y.shape}, X without axis {axis} has {inputs.shape[:-1]}"
            )
        outputs = Y.variable_indices("Y").ravel()
        inputs = inputs.reshape(outputs.size, -1)
        if inputs.shape[1] == 0:
            raise ModelDefinitionError(f"{caller} needs at least one input along axis")
        return outputs, inputs

    def constrain_or(self, Y: Any, X: Any, *, axis: int = -1, group: str, weight: Any) -> None:
        """Enforce ``Y = OR(X along axis)`` elementwise.

        Two inputs need no auxiliary (penalty ``x1 + x2 + y + x1 x2 - 2 x1 y - 2 x2 y``); ``K``
        inputs are chained through ``K - 2`` auxiliaries per element, declared as the array
        ``{group}_chain``.
        """
        Y = self._variables(Y, "Y")
        outputs, inputs = self._reduction_operands(Y, X, axis, "constrain_or")
        count = inputs.shape[1]
        chain_size = max(count - 2, 0)
        chain = np.zeros((outputs.size, 0), INDEX)
        if chain_size:
            aux = self.binary(f"{group}_chain", (*Y.shape, chain_size))
            chain = aux.variable_indices().reshape(outputs.size, chain_size)
        # stage t combines (previous, x_{t+1}) into chain[t] (the last stage into y)
        left = inputs[:, 0]
        parts = []
        if count == 1:
            parts.append(equal_penalties(self.space, outputs, left))
        for t in range(1, count):
            out = outputs if t == count - 1 else chain[:, t - 1]
            parts.append(or_penalties(self.space, out, left, inputs[:, t]))
            left = out
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        target = self._group(group, weight, "or")
        self.space.hold(total.num_terms, f"OR group {group!r}")
        target.chains.append((outputs, inputs, chain))
        target.chunks.append(total)

    def constrain_xor(self, Y: Any, X: Any, *, axis: int = -1, group: str, weight: Any) -> None:
        """Enforce ``Y = XOR(X along axis)`` (the parity of the inputs) elementwise.

        With ``t`` = half the inputs' sum, ``Σx = y + 2t``: the penalty ``(Σx - y - 2t)²`` is
        0 exactly when ``y`` is the parity and ``t`` the binary-coded half, whose bits are
        declared as the array ``{group}_half`` (none for one input).

        >>> import numpy as np
        >>> model = ModelBuilder(np.ones((1, 1)), rank=1)
        >>> X, Y = model.binary("X", (3,)), model.binary("Y", ())
        >>> model.constrain_xor(Y, X, axis=0, group="parity", weight="lam")
        >>> model.arrays["parity_half"]
        (1,)
        """
        Y = self._variables(Y, "Y")
        outputs, inputs = self._reduction_operands(Y, X, axis, "constrain_xor")
        count = inputs.shape[1]
        bits = (count // 2).bit_length()  # t <= count // 2
        halves = np.zeros((outputs.size, 0), INDEX)
        difference = self.space.array(inputs).sum(axis=-1) - self.space.array(outputs)
        if bits:
            half = self.binary(f"{group}_half", (*Y.shape, bits))
            halves = half.variable_indices().reshape(outputs.size, bits)
            powers = np.array([2 ** (b + 1) for b in range(bits)], dtype=float)
            difference = difference - (self.space.array(halves) * powers).sum(axis=-1)
        penalty = difference * difference
        target = self._group(group, weight, "xor")
        self.space.hold(penalty.num_terms, f"XOR group {group!r}")
        target.parities.append((outputs, inputs, halves))
        target.chunks.append(penalty)

    def constrain(self, group: str, penalty: Any, *, weight: Any, slack: str = "binary") -> None:
        """A custom group: each element of ``penalty`` is >= 0 and 0 exactly when it holds.

        A penalty that can go below 0 is an error (a solver would exploit it): each element
        is bounded, or enumerated on up to 14 variables, or searched beyond (see
        :mod:`bmfdsl.modeling._nonnegativity`).

        ``penalty`` may instead be an inequality between linear expressions with integer
        coefficients, ``a <= b`` or ``a >= b`` (elementwise, arrays broadcast): each element
        is one constraint, made an equality with an integer slack variable encoded in
        ``slack`` = ``"binary"`` (log: about log2 of its range in variables) or ``"unary"``
        variables, labelled ``{group}_slack[...][l]``; its penalty ``(a - b + slack)²`` is 0
        exactly when it holds (see :mod:`bmfdsl.modeling._inequalities`). Elements that
        always hold get no penalty; one that never holds is an error.

        >>> import numpy as np
        >>> model = ModelBuilder(np.ones((2, 3)), rank=3)
        >>> U, V = model.factors()
        >>> model.constrain("budget", U.sum(axis=1) <= 2, weight=model.weight("lam"))
        >>> model.constrain("used", V.sum(axis=0) >= 1, weight="lam", slack="unary")
        >>> model.arrays["budget_slack"], model.arrays["used_slack"]
        ((2, 2), (3, 2))
        """
        if isinstance(penalty, Inequality):
            self._constrain_inequality(group, penalty.expression, weight, slack)
            return
        poly = as_poly(penalty, self.space)
        if poly.space is not None and poly.space is not self.space:
            raise ModelDefinitionError("the penalty uses variables of another model")
        target = self._group(group, weight, "custom")
        check_non_negative(poly, group, self.space.label)
        self.space.hold(poly.num_terms, f"group {group!r}")
        target.chunks.append(poly.reshape(-1) if poly.ndim != 1 else poly)

    def constrain_at_most(
        self,
        X: Any,
        k: int,
        *,
        axis: int = -1,
        group: str,
        weight: Any,
        slack: str = "binary",
    ) -> None:
        """At most ``k`` ones along ``axis`` of ``X`` (a linear array, e.g. variables):
        ``model.constrain(group, X.sum(axis=axis) <= k, ...)``.

        With unit coefficients (variables, sums and differences of them) the group has a
        sufficient weight (``compiled.sufficient_weights()``).
        """
        self.constrain(
            group, as_poly(X, self.space).sum(axis=axis) <= k, weight=weight, slack=slack
        )

    def constrain_at_least(
        self,
        X: Any,
        k: int,
        *,
        axis: int = -1,
        group: str,
        weight: Any,
        slack: str = "binary",
    ) -> None:
        """At least ``k`` ones along ``axis`` of ``X``: ``model.constrain(group,
        X.sum(axis=axis) >= k, ...)`` (see :meth:`constrain_at_most`)."""
        self.constrain(
            group, as_poly(X, self.space).sum(axis=axis) >= k, weight=weight, slack=slack
        )

    def _constrain_inequality(
        self, group: str, expression: PolyArray, weight: Any, slack: str
    ) -> None:
        """``expression <= 0`` elementwise: slack variables and ``(expression + slack)²``."""
        check_encoding(slack)
        if expression.space is not None and expression.space is not self.space:
            raise ModelDefinitionError("the inequality uses variables of another model")
        target = self._group(group, weight, "inequality")
        lhs, spans = plan_inequalities(expression, f"constraint group {group!r}")
        coefficients = slack_coefficients(spans, slack)
        keep = coefficients.any(axis=0)  # no column of unused slack variables
        coefficients = coefficients[:, keep]
        indices = np.zeros(coefficients.shape, INDEX)
        if coefficients.size:
            name = f"{group}_slack"
            name = next(
                f"{name}{suffix}"
                for suffix in ("", *range(2, len(self.space.blocks) + 2))
                if f"{name}{suffix}" not in self.space.blocks
            )
            variables = self.binary(name, coefficients.shape)
            indices = variables.variable_indices()
            gap = lhs + (variables * coefficients).sum(axis=1)
        else:
            gap = lhs
        penalty = gap * gap
        self.space.hold(penalty.num_terms, f"inequality group {group!r}")
        target.chunks.append(penalty)
        target.inequalities.append(InequalityRows(lhs, indices, coefficients))

    # -- objective -------------------------------------------------------------------------
    def minimize(
        self,
        expression: Any,
        *,
        quadratize: str | None = None,
        aux: str | None = None,
        weight: Any = "lam",
    ) -> None:
        """Add ``expression`` (summed over its elements) to the objective.

        A quartic expression, the squares of a quadratic array such as
        ``((A - U @ V.T) ** 2).sum()``, needs ``quadratize="products"`` (an auxiliary per
        product: Formulation 1) or ``"pairs"`` (an auxiliary per pair of factors within a
        row: reduced Formulation 2); see :mod:`bmfdsl.modeling._quadratize`. A product that a
        ``constrain_product`` of the model already declares keeps its auxiliary (declare
        them first to choose their labels, as the registered formulations do); the others
        become the 1-D array ``aux`` (default ``"P"`` or ``"Q"``), constrained in the group
        of that name with penalty weight ``weight`` (declared with default 1, the paper's,
        if new; not declared when the model's own products cover every product).

        >>> import numpy as np
        >>> model = ModelBuilder(np.array([[1, 0], [1, 1]]), rank=2)
        >>> U, V = model.factors()
        >>> model.minimize(((model.A - U @ V.T) ** 2).sum(), quadratize="products")
        >>> model.arrays["P"], sorted(model.groups), model.weights["lam"].default
        ((8,), ['P'], 1.0)
        >>> from bmfdsl.modeling import factor_products
        >>> declared = ModelBuilder(model.A, rank=2)
        >>> U, V, W = factor_products(declared)             # W[k][i][j] = U[i][k] V[j][k]
        >>> declared.minimize(((declared.A - U @ V.T) ** 2).sum(), quadratize="products")
        >>> sorted(declared.arrays), sorted(declared.groups)  # W stands in for every u v
        (['U', 'V', 'W'], ['W'])

        A term multiplied by a weight (``model.weight("mu") * U.sum()``) keeps the weight
        symbolic: ``to_bqm(mu=...)`` re-weights it (see :meth:`weight`).
        """
        if isinstance(expression, WeightedOperand):
            parts = weighted(expression).parts
            quartic = any(isinstance(part, Squares) for part in parts.values())
            for name, part in parts.items():
                if name and name not in self.weights:
                    raise ModelDefinitionError(
                        f"weight {name!r} multiplies the objective but this model does not "
                        f"declare it; use {name} = model.weight({name!r}) of this model; "
                        f"declared: {sorted(self.weights)}"
                    )
                how = quadratize if isinstance(part, Squares) or not quartic else None
                self._minimize_part(part, name, how, aux, weight)
            return
        self._minimize_part(expression, "", quadratize, aux, weight)

    def _minimize_part(
        self,
        expression: Any,
        objective_weight: str,
        quadratize: str | None,
        aux: str | None,
        weight: Any,
    ) -> None:
        """Add one part of the objective, multiplied by ``objective_weight`` (``""``: 1)."""
        if isinstance(expression, Squares):
            self._minimize_squares(expression, quadratize, aux, weight, objective_weight)
            return
        if quadratize is not None:
            raise ModelDefinitionError(
                "quadratize= applies to squares of a quadratic array (a quartic objective); "
                "this expression has degree at most 2: drop quadratize="
            )
        poly = as_poly(expression, self.space)
        if poly.space is not None and poly.space is not self.space:
            raise ModelDefinitionError("the objective uses variables of another model")
        self._add_objective(poly, objective_weight)

    def _add_objective(self, poly: PolyArray, objective_weight: str) -> None:
        self.space.hold(poly.num_terms, "its objective")
        summed = poly.sum() if poly.ndim else poly
        if not objective_weight:
            self.objective = self.objective + summed
        elif objective_weight in self.weighted_objective:
            self.weighted_objective[objective_weight] = (
                self.weighted_objective[objective_weight] + summed
            )
        else:
            self.weighted_objective[objective_weight] = summed

    def _minimize_squares(
        self,
        squares: Squares,
        quadratize: str | None,
        aux: str | None,
        weight: Any,
        objective_weight: str = "",
    ) -> None:
        if quadratize not in QUADRATIZATIONS:
            raise ModelDefinitionError(
                f"the objective is quartic (squares of a quadratic array, {squares!r}); pass "
                f"model.minimize(..., quadratize=...) with one of {list(QUADRATIZATIONS)} to "
                f"substitute auxiliary variables; got {quadratize!r}"
            )
        residual = squares.residual
        if residual.space is not self.space:
            raise ModelDefinitionError("the objective uses variables of another model")
        name = aux or ("P" if quadratize == "products" else "Q")
        if quadratize == "products":
            merged = merge_terms(residual)
            indices = self._product_auxiliaries(name, product_pairs(merged), weight)
            linear = substitute_products(merged, indices)
            square = linear * linear
            scaled = not (squares.scale == 1).all()  # data weights, a mask
            self._add_objective(square * squares.scale if scaled else square, objective_weight)
        else:
            plan = plan_pairs(residual)
            indices = self._product_auxiliaries(name, plan.pairs, weight)
            pairs = pair_objective(plan, residual, indices, squares.scale)
            self._add_objective(pairs, objective_weight)

    def _product_auxiliaries(self, name: str, pairs: np.ndarray, weight: Any) -> np.ndarray:
        """The auxiliary of each product ``x_t y_t`` (rows of ``pairs``, repeats allowed): the
        ``z`` of a declared ``constrain_product``, else one new ``name[p]`` per distinct
        product, constrained in group ``name``."""
        products = [g.product_indices for g in self.groups.values() if g.kind == "product"]
        z, a, b = (
            (np.concatenate(column) for column in zip(*products, strict=True))
            if products
            else (np.zeros(0, INDEX),) * 3
        )
        found = declared_auxiliaries(pairs, z, a, b)
        missing = np.flatnonzero(found < 0)
        # the weight of the quadratization's own auxiliaries (tunable even at a size that needs
        # none); declarations that cover every product keep their own weights
        own = missing.size or not pairs.shape[0]
        if own and isinstance(weight, str) and weight not in self.weights:
            self.weight(weight, default=1.0)
        if missing.size:
            if name in self.space.blocks:
                raise ModelDefinitionError(
                    f"the auxiliary array {name!r} exists already: give this quartic objective "
                    "its own, model.minimize(..., aux='another name')"
                )
            new, which = distinct_pairs(pairs[missing])
            Z = self.binary(name, (new.shape[0],))
            x, y = self.space.array(new[:, 0]), self.space.array(new[:, 1])
            self.constrain_product(Z, x, y, group=name, weight=weight)
            found[missing] = Z.variable_indices()[which]
        return found

    def declare_bmf(
        self,
        mask: Any = None,
        entry_weights: Any = None,
        *,
        weights: Any = None,
        product: str = "sum",
        l1: Any = 0.0,
        at_most: Any = None,
        at_least: Any = None,
    ) -> None:
        """Claim: on feasible points the energy equals
        ``Σ_ij w_ij m_ij (a_ij - (U ∘ V)_ij)² + l1_U Σ U + l1_V Σ V``.

        ``product`` is ``"sum"`` (the integer ``U Vᵀ``, the default), ``"or"`` (Boolean) or
        ``"xor"`` (GF(2)). ``mask`` (0/1, 1 = observed) and ``entry_weights`` (``w``,
        non-negative) default to ones; ``weights=`` is the deprecated name of
        ``entry_weights=``. ``l1`` is the L1 weight of both factors, or a pair ``(U's, V's)``:
        a number, or a model weight (its name or handle: its value is read at solve time).
        ``at_most`` / ``at_least`` bound the ones per row of the factors: an int for both, or
        a pair (``None``: no bound on that side); a one-hot side is ``(1, 1)`` already.
        The constraints themselves are the model's to declare; the claim says only that its
        feasible points are those rows. ``compile_model`` checks the claim (on the instance,
        or a large one on sub-instances first); structure-aware backends (``native``) then
        solve the model directly.
        """
        entry_weights = renamed_entry_weights(entry_weights, weights, "declare_bmf")
        shape = self.A.shape

        source = self.data.key_of

        self.claim = StructureClaim(
            mask=None if mask is None else check_entry_array(mask, shape, "mask", binary=True),
            entry_weights=None
            if entry_weights is None
            else check_entry_array(entry_weights, shape, "entry_weights", binary=False),
            mask_source=source(mask),
            entry_weights_source=source(entry_weights),
            product=check_product(product),
            l1=self._l1_pair(l1),
            row_limits=_row_limits(at_least, at_most, self.rank),
        )

    def _l1_pair(self, l1: Any) -> tuple[float | str, float | str]:
        """``l1`` of ``declare_bmf`` as ``(U's, V's)``: numbers >= 0 or declared weights."""
        pair = tuple(l1) if isinstance(l1, tuple | list) else (l1, l1)
        if len(pair) != 2:
            raise ModelDefinitionError(
                f"declare_bmf(l1=...) takes one weight or a pair (U's, V's); got {l1!r}"
            )
        out: list[float | str] = []
        for value in pair:
            if isinstance(value, Weight | str):
                name = value.name if isinstance(value, Weight) else value
                if name not in self.weights:
                    raise ModelDefinitionError(
                        f"declare_bmf(l1={name!r}) names no declared weight; declare it first "
                        f"with model.weight({name!r}) (declared: {sorted(self.weights)})"
                    )
                out.append(name)
            elif isinstance(value, int | float | np.number) and not isinstance(value, bool):
                if not np.isfinite(value) or value < 0:
                    raise ModelDefinitionError(
                        f"declare_bmf(l1=...) must be a number >= 0 or a weight; got {value!r}"
                    )
                out.append(float(value))
            else:
                raise ModelDefinitionError(
                    f"declare_bmf(l1=...) must be a number >= 0, a weight's name or handle; "
                    f"got {value!r}"
                )
        return out[0], out[1]

    def declare_plain_bmf(self) -> None:
        """Claim that feasible energies equal ``||A - U Vᵀ||²_F`` (see :meth:`declare_bmf`)."""
        self.declare_bmf()

    def declare_error(self, function: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> None:
        """The model's error metric: ``function(U, V)`` with ``U`` (S, m, r), ``V`` (S, n, r)
        stacked over samples, returning (S,) errors. Decoded samples are ranked by it."""
        if not callable(function):
            raise ModelDefinitionError("declare_error needs a function (U, V) -> errors")
        self.error_function = function

    def declaration(self) -> Declaration:
        """The declaration so far as term tables, for compiling (the builder is unchanged).

        >>> import numpy as np
        >>> from bmfdsl.modeling import quadratized_residual
        >>> model = ModelBuilder(np.ones((2, 3)), rank=2)
        >>> quadratized_residual(model)
        >>> declared = model.declaration()
        >>> declared.arrays["W"], sorted(declared.groups), declared.objective.num_terms
        ((2, 2, 3), ['W'], 18)
        """
        return Declaration(
            A=self.A,
            rank=self.rank,
            one_hot=self.one_hot,
            space=self.space,
            weights=dict(self.weights),
            groups=snapshot_groups(self.groups),
            factor_names=self.factor_names,
            factor_arrays=self.factor_arrays,
            claim=self.claim,
            error_function=self.error_function,
            objective_terms=SummedTerms.of(self.objective),
            weighted_objective_terms={
                name: SummedTerms.of(part) for name, part in self.weighted_objective.items()
            },
        )

    # -- checks ----------------------------------------------------------------------------
    def check_complete(self, source: str) -> None:
        """Raise :class:`ModelDefinitionError` when the declaration cannot be compiled."""
        if self.factor_names is None:
            raise ModelDefinitionError(
                f"{source}: build(model) never declared its factors: call model.factors() "
                "(U and V) or model.factor() (one U, A ≈ U Uᵀ)"
            )
        if self.one_hot is not None and not self._one_hot_declared:
            raise ModelDefinitionError(
                f"{source} does not support one_hot={self.one_hot!r}: its build(model) never "
                "calls model.one_hot_constraint()"
            )
        for spec in self.weights.values():
            if isinstance(spec.default, str) and spec.default not in self.weights:
                raise ModelDefinitionError(
                    f"{source}: weight {spec.name!r} defaults to unknown weight {spec.default!r}"
                )
        if self.objective.degree == 0 and not self.groups and not self.weighted_objective:
            raise InvalidParameterError(f"{source} declares no objective and no constraints")


def _row_limits(
    at_least: Any, at_most: Any, rank: int
) -> tuple[RowLimits | None, RowLimits | None]:
    """``declare_bmf``'s ``at_least`` / ``at_most`` as ``(U's, V's)`` limits ``(lo, hi)``."""

    def pair(value: Any, name: str) -> tuple[int | None, int | None]:
        both = tuple(value) if isinstance(value, tuple | list) else (value, value)
        if len(both) != 2:
            raise ModelDefinitionError(
                f"declare_bmf({name}=...) takes an int or a pair (U's, V's); got {value!r}"
            )
        for item in both:
            if item is not None and (
                isinstance(item, bool) or not isinstance(item, int | np.integer) or item < 0
            ):
                raise ModelDefinitionError(
                    f"declare_bmf({name}=...) must be an int >= 0 or None; got {item!r}"
                )
        return both[0], both[1]

    lows, highs = pair(at_least, "at_least"), pair(at_most, "at_most")
    out: list[RowLimits | None] = []
    for side, lo, hi in zip("UV", lows, highs, strict=True):
        if lo is None and hi is None:
            out.append(None)
            continue
        limits = (0 if lo is None else int(lo), rank if hi is None else min(int(hi), rank))
        if limits[0] > limits[1]:
            raise ModelDefinitionError(
                f"declare_bmf: rows of {side} cannot hold at least {limits[0]} and at most "
                f"{limits[1]} ones (rank {rank})"
            )
        out.append(None if limits == (0, rank) else limits)  # (0, rank) limits nothing
    return out[0], out[1]

"""Arrays of quadratic polynomials over binary variables, with numpy semantics.

A :class:`PolyArray` is what a model script computes with: ``model.binary(...)`` and
``model.factors()`` return arrays of variables, and indexing, slicing, transposition,
broadcasting, ``sum(axis=...)``, ``+ - *`` with numbers, numpy arrays and other
:class:`PolyArray` objects, ``@`` and :func:`einsum` all work elementwise as in numpy. Every
element is a polynomial of degree at most 2 (``x * x`` is ``x`` for binary ``x``); a product
that would need degree 3 raises :class:`~bmfdsl.errors.ModelDefinitionError` naming the term.

Internally an array is a table of terms ``(element, first variable, second variable,
coefficient)`` plus a dense array of constants, so every operation is a few numpy calls
whatever the array's size. An array of plain variables keeps only its variable indices, so
``U[i][k]`` in a loop is cheap too.

The term-table kernels live in :mod:`bmfdsl.modeling._term_tables`. This module stays near 700
lines on purpose: :class:`PolyArray`, :class:`Squares` (what ``R * R`` returns), :func:`as_poly`,
:func:`stack` and :func:`einsum` call each other both ways (``@`` is ``einsum``, ``einsum``
multiplies arrays), so splitting them would only add an import cycle.

>>> space = VariableSpace()
>>> U = space.allocate("U", (2, 1))
>>> V = space.allocate("V", (3, 1))
>>> P = einsum("ik,jk->ij", U, V)           # (U Vᵀ)_ij: quadratic
>>> P.shape, P.degree
((2, 3), 2)
>>> mismatches = (np.ones((2, 3)) - P).sum()
>>> x = np.zeros(space.size, dtype=np.int8); x[[0, 2]] = 1   # U[0][0] = V[0][0] = 1
>>> float(mismatches.evaluate(x[None])[0])
5.0
>>> ((np.ones((2, 3)) - P) ** 2).sum()     # quartic: kept aside until a model quadratizes it
Squares(shape=(2, 3), residual terms=6)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bmfdsl.errors import ModelDefinitionError, ModelTooLargeError
from bmfdsl.modeling._operands import UFUNC_OPERATORS, WeightedOperand, refuse_numpy
from bmfdsl.modeling._term_tables import (
    INDEX,
    TERM_BYTES,
    as_data,
    broadcast_shapes,
    empty_terms,
    pairs_within_elements,
    term_products,
)


@dataclass(frozen=True)
class VariableBlock:
    """A named array of binary variables: indices ``start .. start + size`` in C order."""

    name: str
    shape: tuple[int, ...]
    start: int

    @property
    def size(self) -> int:
        """The number of variables in the block."""
        return int(np.prod(self.shape, dtype=np.int64))

    def labels(self) -> list[str]:
        """Labels ``name[i][j]...`` in C order (``name`` alone for a 0-d block)."""
        labels = [self.name]
        for length in self.shape:  # one concatenation per label and axis: fast for millions
            suffixes = [f"[{i}]" for i in range(length)]
            labels = [prefix + suffix for prefix in labels for suffix in suffixes]
        return labels

    def label(self, offset: int) -> str:
        """The label of the block's ``offset``-th variable."""
        index = np.unravel_index(offset, self.shape) if self.shape else ()
        return self.name + "".join(f"[{int(i)}]" for i in index)


class VariableSpace:
    """The binary variables of one model, allocated block by block in declaration order.

    ``term_limit`` bounds the number of terms (the size guard): any single array, and all the
    terms the model holds together (:meth:`hold`). An operation that would pass it raises
    :class:`~bmfdsl.errors.ModelTooLargeError` before anything is allocated.
    """

    def __init__(self, term_limit: int | None = None) -> None:
        self.blocks: dict[str, VariableBlock] = {}
        self.size = 0
        self.term_limit = term_limit
        self.held_terms = 0

    def allocate(self, name: str, shape: Sequence[int]) -> PolyArray:
        """A new block of variables; returns it as a :class:`PolyArray` of variables."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ModelDefinitionError(f"variable array names must be identifiers; got {name!r}")
        if name in self.blocks:
            raise ModelDefinitionError(f"variable array {name!r} is declared twice")
        dims = tuple(int(s) for s in shape)
        if any(s < 0 for s in dims):
            raise ModelDefinitionError(f"variable array {name!r} has a negative shape {dims}")
        block = VariableBlock(name, dims, self.size)
        self.check_terms(block.size, f"the variables of {name!r}")
        self.blocks[name] = block
        self.size += block.size
        if self.size + block.size >= np.iinfo(INDEX).max:
            raise ModelTooLargeError(f"a model holds at most {np.iinfo(INDEX).max:,} variables")
        indices = block.start + np.arange(block.size, dtype=INDEX)
        return PolyArray._variables(self, indices.reshape(dims))

    def array(self, indices: Any) -> PolyArray:
        """The variables with these indices, as a :class:`PolyArray` of ``indices``' shape."""
        return PolyArray._variables(self, np.asarray(indices, dtype=INDEX))

    def labels(self) -> list[str]:
        """Every variable label, in index order."""
        labels: list[str] = []
        for block in self.blocks.values():
            labels.extend(block.labels())
        return labels

    def label(self, index: int) -> str:
        """The label of variable ``index``."""
        for block in self.blocks.values():
            if block.start <= index < block.start + block.size:
                return block.label(index - block.start)
        raise IndexError(index)

    def hold(self, count: int, what: str) -> None:
        """Count ``count`` more terms as kept by the model (objective, penalties)."""
        self.check_terms(self.held_terms + count, f"the model with {what}")
        self.held_terms += count

    def check_terms(self, count: int, what: str) -> None:
        """Refuse to build ``count`` terms beyond the size guard."""
        if self.term_limit is not None and count > self.term_limit:
            raise ModelTooLargeError(
                f"{what} would hold {count:,} terms (about {count * TERM_BYTES / 2**30:.1f} GiB; "
                f"{self.size:,} variables declared so far), "
                f"over the model size limit of {self.term_limit * TERM_BYTES / 2**30:.1f} GiB; "
                "sample rows (factorize(sample_rows='auto')), use the 'native' backend, lower "
                "the rank, or raise compile_model(memory_limit=...)"
            )


@dataclass(frozen=True)
class Inequality:
    """``expression <= 0`` elementwise: what ``a <= b`` and ``a >= b`` give for linear arrays.

    Pass it to :meth:`~bmfdsl.modeling.ModelBuilder.constrain`; it has no truth value.
    """

    expression: PolyArray

    def __bool__(self) -> bool:
        raise ModelDefinitionError(
            "an inequality of variables has no truth value: pass it to model.constrain(group, "
            "a <= b, weight=...); write 0 <= x <= 2 as two constraints"
        )


class PolyArray:
    """An array of polynomials of degree <= 2 in binary variables (see the module docs).

    Create arrays through ``model.binary``/``model.factors`` (or :meth:`VariableSpace.allocate`)
    and combine them with numpy-style operations.

    Attributes:
        shape: the array's shape.
    """

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """ndarray ``+ - * @ <= >=`` a PolyArray: the PolyArray's (reflected) operator; any
        other ufunc is refused with what to use instead."""
        operators = UFUNC_OPERATORS.get(ufunc)
        if method == "__call__" and not kwargs and operators is not None and len(inputs) == 2:
            left, right = inputs
            if isinstance(left, PolyArray):
                return getattr(left, operators[0])(right)
            return getattr(right, operators[1])(left)
        if method == "__call__" and not kwargs and ufunc is np.negative:
            return -inputs[0]
        raise refuse_numpy("PolyArray", ufunc.__name__)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        raise refuse_numpy("PolyArray", func.__name__)

    def __init__(
        self,
        space: VariableSpace | None,
        shape: tuple[int, ...],
        const: np.ndarray,
        elem: np.ndarray,
        var: np.ndarray,
        coef: np.ndarray,
    ) -> None:
        self.space = space
        self.shape = tuple(int(s) for s in shape)
        self.const = const  # float64, ``shape``
        self.elem = elem  # int64 (T,): flat element of each term
        self.var = var  # int64 (T, 2): variables; var[:, 1] == -1 for a linear term
        self.coef = coef  # float64 (T,)
        self._vars: np.ndarray | None = None  # set for arrays of plain variables

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def _variables(cls, space: VariableSpace | None, indices: np.ndarray) -> PolyArray:
        out = cls.__new__(cls)
        out.space = space
        out._vars = np.asarray(indices, dtype=INDEX)
        out.shape = out._vars.shape  # a tuple of ints already: cheap for U[i][k] in loops
        return out

    def _materialise(self) -> None:
        if self._vars is not None and not hasattr(self, "elem"):
            flat = self._vars.ravel()
            self.const = np.zeros(self.shape)
            self.elem = np.arange(flat.size, dtype=INDEX)
            self.var = np.stack([flat, np.full(flat.size, -1, INDEX)], axis=1)
            self.coef = np.ones(flat.size)

    @property
    def terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(const, elem, var, coef)``: the constant array and the term table."""
        self._materialise()
        return self.const, self.elem, self.var, self.coef

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def num_terms(self) -> int:
        """The number of stored (non-constant) terms."""
        return self.size if self._vars is not None else int(self.terms[1].size)

    @property
    def degree(self) -> int:
        """The highest degree of any term (0 for a constant array)."""
        if self._vars is not None:
            return 1 if self.size else 0
        _, _, var, _ = self.terms
        if var.shape[0] == 0:
            return 0
        return 2 if (var[:, 1] >= 0).any() else 1

    def variable_indices(self, role: str = "array") -> np.ndarray:
        """The variable index of every element; each element must be one plain variable."""
        if self._vars is not None:
            return self._vars
        const, elem, var, coef = self.terms
        count = np.bincount(elem, minlength=self.size)
        plain = (
            (count == 1).all() and not const.any() and (var[:, 1] < 0).all() and (coef == 1).all()
        )
        if not plain:
            raise ModelDefinitionError(
                f"{role} must be an array of single binary variables (elements of "
                "model.binary(...) or model.factors()), not expressions"
            )
        out = np.empty(self.size, INDEX)
        out[elem] = var[:, 0]
        return out.reshape(self.shape)

    def __repr__(self) -> str:
        return f"PolyArray(shape={self.shape}, terms={self.num_terms}, degree={self.degree})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d PolyArray")
        return self.shape[0]

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        raise ModelDefinitionError(
            "a PolyArray has no truth value (it is symbolic); compare data, not variables"
        )

    # -- structure: every reshaping is a gather of elements ---------------------------------
    def _gather(self, index: np.ndarray) -> PolyArray:
        """The array whose element ``p`` is this array's element ``index[p]``."""
        index = np.asarray(index, dtype=INDEX)
        if self._vars is not None:
            return PolyArray._variables(self.space, self._vars.ravel()[index])
        const, elem, var, coef = self.terms
        flat = index.ravel()
        counts = np.bincount(flat, minlength=self.size) if flat.size else np.zeros(self.size, int)
        if flat.size == 0 or counts.max() <= 1:  # a selection or permutation: no copies
            inverse = np.full(self.size, -1, INDEX)
            inverse[flat] = np.arange(flat.size, dtype=INDEX)
            new_elem = inverse[elem]
            keep = new_elem >= 0
            if not keep.all():
                new_elem, var, coef = new_elem[keep], var[keep], coef[keep]
        else:  # broadcasting repeats elements: repeat their terms too
            reps = counts[elem]
            total = int(reps.sum())
            if self.space is not None:
                self.space.check_terms(total, "a broadcast")
            order = np.argsort(flat, kind="stable")
            starts = np.cumsum(counts) - counts
            source = np.repeat(np.arange(elem.size), reps)
            within = np.arange(total) - np.repeat(np.cumsum(reps) - reps, reps)
            new_elem = order[starts[elem[source]] + within].astype(INDEX)
            var, coef = var[source], coef[source]
        return PolyArray(self.space, index.shape, const.ravel()[index], new_elem, var, coef)

    def _positions(self) -> np.ndarray:
        return np.arange(self.size, dtype=INDEX).reshape(self.shape)

    def __getitem__(self, key: Any) -> PolyArray:
        if isinstance(key, PolyArray):
            raise ModelDefinitionError("index a PolyArray with integers, slices or index arrays")
        try:
            if self._vars is not None:  # plain variables: index them directly (cheap in loops)
                return PolyArray._variables(self.space, np.asarray(self._vars[key]))
            index = self._positions()[key]
        except IndexError as exc:
            raise ModelDefinitionError(
                f"index {key!r} out of range for shape {self.shape}"
            ) from exc
        return self._gather(np.asarray(index))

    def transpose(self, *axes: Any) -> PolyArray:
        """Permute the axes as :meth:`numpy.ndarray.transpose`."""
        if len(axes) == 1 and isinstance(axes[0], Sequence):
            axes = tuple(axes[0])
        return self._gather(self._positions().transpose(*axes) if axes else self._positions().T)

    @property
    def T(self) -> PolyArray:
        """The transposed array."""
        return self.transpose()

    def reshape(self, *shape: Any) -> PolyArray:
        """The same elements in another shape (C order)."""
        if len(shape) == 1 and isinstance(shape[0], Sequence):
            shape = tuple(shape[0])
        return self._gather(self._positions().reshape(shape))

    def broadcast_to(self, shape: Sequence[int]) -> PolyArray:
        """This array broadcast to ``shape`` (numpy rules)."""
        shape = tuple(int(s) for s in shape)
        if shape == self.shape:
            return self
        try:
            index = np.broadcast_to(self._positions(), shape)
        except ValueError as exc:
            raise ModelDefinitionError(
                f"cannot broadcast shape {self.shape} to {shape}: {exc}"
            ) from exc
        return self._gather(index)

    # -- reductions --------------------------------------------------------------------------
    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> PolyArray:
        """Sum over ``axis`` (all axes by default), as :meth:`numpy.ndarray.sum`."""
        ndim = self.ndim
        if axis is None:
            axes = tuple(range(ndim))
        else:
            requested = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
            axes = tuple(int(a) for a in requested)
            for a in axes:
                if not -ndim <= a < ndim:
                    raise ModelDefinitionError(
                        f"axis {a} is out of range for an array of {ndim} dimension(s)"
                    )
            axes = tuple(sorted({a % ndim for a in axes}))
        const, elem, var, coef = self.terms
        kept = [d for d in range(ndim) if d not in axes]
        new_const = const.sum(axis=axes, keepdims=keepdims)
        if kept:
            coords = np.unravel_index(elem, self.shape)
            new_elem = np.ravel_multi_index(
                [coords[d] for d in kept], [self.shape[d] for d in kept]
            ).astype(INDEX)
        else:
            new_elem = np.zeros(elem.size, INDEX)
        return PolyArray(
            self.space, np.shape(new_const), np.asarray(new_const, float), new_elem, var, coef
        )

    # -- arithmetic --------------------------------------------------------------------------
    def _combine_space(self, other: PolyArray) -> VariableSpace | None:
        if self.space is not None and other.space is not None and self.space is not other.space:
            raise ModelDefinitionError("cannot combine variables of two different models")
        return self.space if self.space is not None else other.space

    def __add__(self, other: Any) -> PolyArray:
        if isinstance(other, WeightedOperand):
            return NotImplemented
        other = as_poly(other, self.space)
        space = self._combine_space(other)
        shape = broadcast_shapes(self.shape, other.shape)
        a, b = self.broadcast_to(shape), other.broadcast_to(shape)
        ca, ea, va, wa = a.terms
        cb, eb, vb, wb = b.terms
        if space is not None:
            space.check_terms(ea.size + eb.size, "a sum")
        return PolyArray(
            space,
            shape,
            ca + cb,
            np.concatenate([ea, eb]),
            np.concatenate([va, vb]),
            np.concatenate([wa, wb]),
        )

    __radd__ = __add__

    def __le__(self, other: Any) -> Inequality:
        if isinstance(other, WeightedOperand):
            return NotImplemented
        return Inequality(self - other)

    def __ge__(self, other: Any) -> Inequality:
        if isinstance(other, WeightedOperand):
            return NotImplemented
        return Inequality(as_poly(other, self.space) - self)

    def __neg__(self) -> PolyArray:
        const, elem, var, coef = self.terms
        return PolyArray(self.space, self.shape, -const, elem, var, -coef)

    def __pos__(self) -> PolyArray:
        return self

    def __sub__(self, other: Any) -> PolyArray:
        if isinstance(other, WeightedOperand):
            return NotImplemented
        return self + (-as_poly(other, self.space))

    def __rsub__(self, other: Any) -> PolyArray:
        if isinstance(other, WeightedOperand):
            return NotImplemented
        return as_poly(other, self.space) + (-self)

    def _scale(self, factor: np.ndarray) -> PolyArray:
        shape = broadcast_shapes(self.shape, factor.shape)
        a = self.broadcast_to(shape)
        const, elem, var, coef = a.terms
        factor = np.broadcast_to(factor, shape).ravel()
        new_coef = coef * factor[elem]
        keep = new_coef != 0
        if not keep.all():
            elem, var, new_coef = elem[keep], var[keep], new_coef[keep]
        return PolyArray(self.space, shape, const * factor.reshape(shape), elem, var, new_coef)

    def __mul__(self, other: Any) -> Any:
        if not isinstance(other, PolyArray):
            if isinstance(other, WeightedOperand):
                return NotImplemented
            return self._scale(as_data(other))
        if other is self:
            square = self._linear_square()
            if square is not None:
                return square
            if self.degree == 2:  # quartic: kept as squares until the model quadratizes it
                return Squares(self)
        if self._vars is not None and other._vars is not None:
            return self._variable_product(other)
        space = self._combine_space(other)
        shape = broadcast_shapes(self.shape, other.shape)
        a, b = self.broadcast_to(shape), other.broadcast_to(shape)
        ca, ea, va, wa = a.terms
        cb, eb, vb, wb = b.terms
        size = int(np.prod(shape, dtype=np.int64))
        # (ca + Ta)(cb + Tb) = ca cb + ca Tb + cb Ta + Ta Tb
        na = np.bincount(ea, minlength=size)
        nb = np.bincount(eb, minlength=size)
        pairs = int((na * nb).sum())
        if space is not None:
            space.check_terms(ea.size + eb.size + pairs, "a product")
        ca_flat, cb_flat = ca.ravel(), cb.ravel()
        parts = [
            (eb, vb, wb * ca_flat[eb]),
            (ea, va, wa * cb_flat[ea]),
            term_products(ea, va, wa, eb, vb, wb, na, nb, pairs, space.label if space else str),
        ]
        elem = np.concatenate([p[0] for p in parts])
        var = np.concatenate([p[1] for p in parts])
        coef = np.concatenate([p[2] for p in parts])
        keep = coef != 0
        if not keep.all():
            elem, var, coef = elem[keep], var[keep], coef[keep]
        return PolyArray(space, shape, ca * cb, elem, var, coef)

    __rmul__ = __mul__

    def _variable_product(self, other: PolyArray) -> PolyArray:
        """The product of two arrays of plain variables: one term per element, no gathering."""
        space = self._combine_space(other)
        assert self._vars is not None and other._vars is not None
        x, y = np.broadcast_arrays(self._vars, other._vars)
        shape = x.shape
        x, y = x.ravel(), y.ravel()
        if space is not None:
            space.check_terms(x.size, "a product")
        same = x == y  # x * x = x for a binary x
        var = np.stack([np.minimum(x, y), np.where(same, -1, np.maximum(x, y))], axis=1)
        elem = np.arange(x.size, dtype=INDEX)
        return PolyArray(space, shape, np.zeros(shape), elem, var, np.ones(x.size))

    def _linear_square(self) -> PolyArray | None:
        """``self * self`` for a linear array, each pair of terms once: (Σ w x)² =
        Σ w² x + 2 Σ_{s<t} w_s w_t x_s x_t + 2 c Σ w x + c² (x² = x). None if not linear."""
        const, elem, var, coef = self.terms
        if (var[:, 1] >= 0).any():
            return None
        order = np.argsort(elem, kind="stable")
        elem, first, coef = elem[order], var[order, 0], coef[order]
        counts = np.bincount(elem, minlength=self.size)
        if self.space is not None:
            pairs = int((counts * (counts - 1) // 2).sum())
            self.space.check_terms(2 * elem.size + pairs, "a square")
        left, right = pairs_within_elements(elem, self.size)
        x, y = first[left], first[right]
        same = x == y
        flat_const = const.ravel()
        quad_var = np.stack([np.minimum(x, y), np.where(same, -1, np.maximum(x, y))], axis=1)
        none = np.full(elem.size, -1, INDEX)
        out_elem = np.concatenate([elem, elem[left]])
        out_var = np.concatenate([np.stack([first, none], 1), quad_var])
        # w² x + 2 c w x as one term per x: a residual's linear terms rarely cancel (a - x: 1 - 2a)
        linear = coef * coef + 2.0 * flat_const[elem] * coef
        out_coef = np.concatenate([linear, 2.0 * coef[left] * coef[right]])
        keep = out_coef != 0
        if not keep.all():
            out_elem, out_var, out_coef = out_elem[keep], out_var[keep], out_coef[keep]
        return PolyArray(self.space, self.shape, const * const, out_elem, out_var, out_coef)

    def __pow__(self, exponent: int) -> Any:
        if exponent == 1:
            return self
        if exponent == 2:
            return self * self
        raise ModelDefinitionError(
            f"only powers 1 and 2 of a PolyArray are supported (degree <= 2); got {exponent!r}"
        )

    def __matmul__(self, other: Any) -> PolyArray:
        if isinstance(other, WeightedOperand):
            return NotImplemented
        return einsum("ik,kj->ij", self, other)

    def __rmatmul__(self, other: Any) -> PolyArray:
        if isinstance(other, WeightedOperand):
            return NotImplemented
        return einsum("ik,kj->ij", other, self)

    def dot(self, other: Any) -> PolyArray:
        """Matrix product (2-D operands), as ``self @ other``."""
        return self @ other

    # -- evaluation --------------------------------------------------------------------------
    def evaluate(self, samples: np.ndarray) -> np.ndarray:
        """Values at 0/1 assignments ``samples`` (S x num_variables): shape ``(S, *shape)``."""
        X = np.asarray(samples)
        if X.ndim == 1:
            X = X[None]
        const, elem, var, coef = self.terms
        out = np.broadcast_to(const.ravel(), (X.shape[0], self.size)).astype(float)
        if elem.size:
            second = np.where(var[:, 1] >= 0, var[:, 1], var[:, 0])
            values = X[:, var[:, 0]].astype(float) * X[:, second] * coef
            for s in range(X.shape[0]):
                out[s] += np.bincount(elem, weights=values[s], minlength=self.size)
        return out.reshape((X.shape[0], *self.shape))


class Squares:
    """``scale * residual²`` elementwise, ``residual`` quadratic: a quartic objective.

    What ``R ** 2`` (or ``R * R``) gives for a quadratic :class:`PolyArray` ``R``, such as
    ``A - U @ V.T``. It can be scaled by data and summed whole, and becomes quadratic only in
    ``model.minimize(..., quadratize=...)``, which substitutes auxiliary variables.

    >>> space = VariableSpace()
    >>> U, V = space.allocate("U", (2, 1)), space.allocate("V", (3, 1))
    >>> objective = ((np.ones((2, 3)) - U @ V.T) ** 2).sum()
    >>> objective
    Squares(shape=(2, 3), residual terms=6)
    """

    __array_ufunc__ = None  # numpy defers to our reflected operators: ndarray * Squares works

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        raise refuse_numpy("Squares", func.__name__)

    def __init__(self, residual: PolyArray, scale: np.ndarray | None = None) -> None:
        self.residual = residual
        self.scale = np.ones(residual.shape) if scale is None else scale

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the residual array."""
        return self.residual.shape

    def __repr__(self) -> str:
        return f"Squares(shape={self.shape}, residual terms={self.residual.num_terms})"

    def __mul__(self, factor: Any) -> Squares:
        if isinstance(factor, WeightedOperand):
            return NotImplemented
        if isinstance(factor, PolyArray | Squares):
            raise ModelDefinitionError(
                "a squared quadratic times variables has degree above 4; multiply it by data only"
            )
        data = as_data(factor)
        if broadcast_shapes(self.shape, data.shape) != self.shape:
            raise ModelDefinitionError(
                f"cannot scale squares of shape {self.shape} by data of shape {data.shape}"
            )
        return Squares(self.residual, self.scale * np.broadcast_to(data, self.shape))

    __rmul__ = __mul__

    def sum(self, axis: Any = None) -> Squares:
        """The sum of every element (the objective sums anyway); only a full sum is allowed."""
        if axis is not None:
            raise ModelDefinitionError(
                "squares of a quadratic can only be summed whole (axis=None) before "
                "model.minimize(..., quadratize=...)"
            )
        return self

    def _refuse(self, *_: Any) -> Any:
        raise ModelDefinitionError(
            "squares of a quadratic (a quartic objective) combine with nothing else: pass them "
            "alone to model.minimize(..., quadratize='products' or 'pairs') and minimize the "
            "rest in another call"
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __neg__ = __pow__ = _refuse


def as_poly(value: Any, space: VariableSpace | None = None) -> PolyArray:
    """``value`` as a :class:`PolyArray`: numbers and arrays become constants.

    Nested lists may mix numbers and :class:`PolyArray` elements (see :func:`stack`).
    """
    if isinstance(value, PolyArray):
        return value
    if isinstance(value, list | tuple) and _holds_poly(value):
        return stack(value)
    const = as_data(value)
    elem, var, coef = empty_terms()
    return PolyArray(space, const.shape, const.copy(), elem, var, coef)


def _holds_poly(value: Any) -> bool:
    if isinstance(value, PolyArray):
        return True
    if isinstance(value, list | tuple):
        return any(_holds_poly(v) for v in value)
    return False


def stack(items: Sequence[Any], axis: int = 0) -> PolyArray:
    """Stack equally shaped arrays (or nested lists of them) along a new ``axis``.

    >>> space = VariableSpace()
    >>> x = space.allocate("x", (3,))
    >>> stack([[x[0], 1], [x[1], x[2]]]).shape
    (2, 2)
    """
    if not isinstance(items, list | tuple) or not items:
        raise ModelDefinitionError("stack() needs a non-empty list")
    parts = [as_poly(item) for item in items]
    space = next((p.space for p in parts if p.space is not None), None)
    shape = parts[0].shape
    if any(p.shape != shape for p in parts):
        raise ModelDefinitionError(f"stack() needs equal shapes; got {[p.shape for p in parts]}")
    size = int(np.prod(shape, dtype=np.int64))
    consts, elems, vars_, coefs = [], [], [], []
    for k, part in enumerate(parts):
        const, elem, var, coef = part.terms
        consts.append(const)
        elems.append(elem + k * size)
        vars_.append(var)
        coefs.append(coef)
    out = PolyArray(
        space,
        (len(parts), *shape),
        np.stack(consts),
        np.concatenate(elems),
        np.concatenate(vars_),
        np.concatenate(coefs),
    )
    return out if axis == 0 else out.transpose(_moved_axes(out.ndim, axis))


def _moved_axes(ndim: int, axis: int) -> list[int]:
    order = list(range(1, ndim))
    order.insert(axis % ndim, 0)
    return order


def einsum(subscripts: str, *operands: Any) -> PolyArray:
    """:func:`numpy.einsum` for one or two operands, any of them a :class:`PolyArray`.

    Without a :class:`PolyArray` operand it is :func:`numpy.einsum` itself.

    >>> space = VariableSpace()
    >>> U, V = space.allocate("U", (4, 2)), space.allocate("V", (3, 2))
    >>> einsum("ik,jk->ij", U, V).shape
    (4, 3)
    """
    if not any(isinstance(operand, PolyArray) for operand in operands):
        return np.einsum(subscripts, *operands)  # type: ignore[return-value]
    if "->" not in subscripts:
        raise ModelDefinitionError("einsum needs explicit output subscripts, e.g. 'ik,jk->ij'")
    inputs_text, output = subscripts.replace(" ", "").split("->")
    inputs = inputs_text.split(",")
    if len(inputs) != len(operands) or not 1 <= len(operands) <= 2:
        raise ModelDefinitionError("einsum takes one or two operands matching its subscripts")
    letters: list[str] = []
    for spec in (*inputs, output):
        for letter in spec:
            if letter not in letters:
                letters.append(letter)
    if any(letter not in "".join(inputs) for letter in output):
        raise ModelDefinitionError(f"einsum output {output!r} names an index no input has")
    expanded = []
    for spec, operand in zip(inputs, operands, strict=True):
        array = operand if isinstance(operand, PolyArray) else as_data(operand)
        if len(spec) != array.ndim or len(set(spec)) != len(spec):
            raise ModelDefinitionError(
                f"einsum subscripts {spec!r} do not fit an operand of shape {array.shape}"
            )
        order = sorted(range(len(spec)), key=lambda d: letters.index(spec[d]))
        array = array.transpose(order)
        present = sorted(spec, key=letters.index)
        shape = [array.shape[present.index(c)] if c in present else 1 for c in letters]
        expanded.append(array.reshape(shape))
    product = expanded[0] if len(expanded) == 1 else expanded[0] * expanded[1]
    product = as_poly(product)
    summed = tuple(d for d, c in enumerate(letters) if c not in output)
    result = product.sum(axis=summed) if summed else product
    kept = [c for c in letters if c in output]
    return result.transpose([kept.index(c) for c in output]) if output else result

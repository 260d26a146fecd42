"""Named weights in expressions: ``mu * U.sum()``, as a PyQUBO ``Placeholder``.

:meth:`~bmfdsl.modeling.ModelBuilder.weight` returns a :class:`Weight`; multiplying an
expression by it gives a :class:`WeightedSum`, ``Σ_w w · part_w`` (the part under ``""`` is
unweighted). Sums, differences, products with data and with variables, ``@`` and
``sum(axis=...)`` work part by part, so the weights stay symbolic: the compiled model keeps
one term table per weight and ``to_bqm(mu=...)`` re-weights without recompiling. Products of
two weights are refused: the QUBO stays linear in its weights.

>>> from bmfdsl.modeling._expr import VariableSpace
>>> space = VariableSpace()
>>> x = space.allocate("x", (3,))
>>> mu = Weight("mu")
>>> objective = mu * x.sum() + 2 * (mu * x[0]) - x[1]
>>> sorted(objective.parts), objective.parts["mu"].num_terms
(['', 'mu'], 4)
>>> mu * (mu * x)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
bmfdsl.errors.ModelDefinitionError: a product of two weighted expressions (mu * mu) is not ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bmfdsl.errors import ModelDefinitionError
from bmfdsl.modeling._expr import PolyArray, Squares, WeightedOperand, as_poly

Part = PolyArray | Squares


def _times(part: Part, factor: Any) -> Part:
    """``part * factor`` where either may be :class:`Squares` (scaled by constants only)."""
    if isinstance(factor, Squares) and isinstance(part, PolyArray) and part.degree == 0:
        return factor * part.const
    result: Part = part * factor
    return result


class WeightedSum(WeightedOperand):
    """``Σ_w w · parts[w]``: expressions multiplied by named weights (``""``: weight 1).

    What ``mu * expression`` gives for ``mu = model.weight("mu")``; pass it (or a sum of such)
    to :meth:`~bmfdsl.modeling.ModelBuilder.minimize`.
    """

    __array_ufunc__ = None  # numpy defers to our reflected operators: ndarray * mu works

    def __init__(self, parts: dict[str, Part]) -> None:
        self.parts = parts

    def __repr__(self) -> str:
        names = ", ".join(repr(name) for name in self.parts if name)
        return f"WeightedSum(weights=[{names}])"

    @property
    def weight_names(self) -> list[str]:
        """The weights that multiply a part (``""``, the unweighted part, left out)."""
        return [name for name in self.parts if name]

    def _map(self, operation: Any) -> WeightedSum:
        return WeightedSum({name: operation(part) for name, part in self.parts.items()})

    def __add__(self, other: Any) -> WeightedSum:
        merged = dict(self.parts)
        for name, part in weighted(other).parts.items():
            merged[name] = merged[name] + part if name in merged else part
        return WeightedSum(merged)

    __radd__ = __add__

    def __neg__(self) -> WeightedSum:
        return self._map(lambda part: -part)

    def __pos__(self) -> WeightedSum:
        return self

    def __sub__(self, other: Any) -> WeightedSum:
        return self + (-weighted(other))

    def __rsub__(self, other: Any) -> WeightedSum:
        return weighted(other) + (-self)

    def __mul__(self, other: Any) -> WeightedSum:
        if isinstance(other, WeightedOperand):
            other = weighted(other)
            if list(other.parts) == [""]:
                factor = other.parts[""]
                return self._map(lambda part: _times(part, factor))
            if list(self.parts) == [""]:
                return other * self
            first = "+".join(self.weight_names)
            second = "+".join(other.weight_names)
            raise ModelDefinitionError(
                f"a product of two weighted expressions ({first} * {second}) is not linear in "
                f"the weights; declare one weight for the product, e.g. "
                f"model.weight('{first}_{second}')"
            )
        return self._map(lambda part: _times(part, other))

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> WeightedSum:
        if isinstance(other, WeightedOperand | PolyArray | Squares):
            raise ModelDefinitionError("divide weighted expressions by numbers or data only")
        return self * (1.0 / as_poly(other).const)

    def __matmul__(self, other: Any) -> WeightedSum:
        return self._map(lambda part: part @ other)

    def __rmatmul__(self, other: Any) -> WeightedSum:
        return self._map(lambda part: other @ part)

    def sum(self, axis: Any = None) -> WeightedSum:
        """Every part summed (over ``axis``, as :meth:`PolyArray.sum`)."""
        return self._map(lambda part: part.sum(axis=axis))

    def __pow__(self, exponent: int) -> Any:
        if exponent == 1:
            return self
        raise ModelDefinitionError(
            "powers of a weighted expression are not linear in the weights; square the "
            "expression first, then weigh it: mu * (expr ** 2)"
        )

    def __bool__(self) -> bool:
        raise ModelDefinitionError("a weighted expression has no truth value (it is symbolic)")


@dataclass(frozen=True)
class Weight(WeightedOperand):
    """A handle on a declared weight: ``weight=`` of a constraint group, or a factor of any
    objective term (``mu * U.sum()``), as a PyQUBO ``Placeholder``."""

    name: str

    __array_ufunc__ = None

    def _sum(self) -> WeightedSum:
        return WeightedSum({self.name: as_poly(1.0)})

    def __add__(self, other: Any) -> WeightedSum:
        return self._sum() + other

    __radd__ = __add__

    def __sub__(self, other: Any) -> WeightedSum:
        return self._sum() - other

    def __rsub__(self, other: Any) -> WeightedSum:
        return other - self._sum()

    def __neg__(self) -> WeightedSum:
        return -self._sum()

    def __mul__(self, other: Any) -> WeightedSum:
        return self._sum() * other

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> WeightedSum:
        return self._sum() / other


def weighted(value: Any) -> WeightedSum:
    """``value`` as a :class:`WeightedSum` (an unweighted expression: the part ``""``)."""
    if isinstance(value, WeightedSum):
        return value
    if isinstance(value, Weight):
        return value._sum()
    if isinstance(value, Squares):
        return WeightedSum({"": value})
    return WeightedSum({"": as_poly(value)})

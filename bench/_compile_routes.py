"""The routes that ``bench_compile.py`` times: bmfdsl and its peers on the same QUBO.

Each route builds Formulation 1 or 2 of Malik et al. (2021) for one 0/1 matrix ``A`` and rank
``r`` with penalty weight ``lam`` and returns a :class:`Built`: timings of its two phases, its
variable and interaction counts, a re-weight (``lam = 2``) and its energies on assignments given
in bmfdsl's label order (``U[i][k]``, ``V[j][k]``, ``W[k][i][j]``, ``UU[i][k][l]``...), the
constant included. Each peer is written the way its own documentation writes such a model:

- ``pyqubo``: ``Array.create``, ``W[k, i, j]`` indexing, ``Constraint(Placeholder("lam") * f)``
  per group, ``compile()`` then ``to_bqm(feed_dict)``.
- ``amplify``: ``VariableGenerator().array`` polynomial arrays and numpy-like algebra; the
  penalty is its own polynomial, added as ``objective + lam * penalty`` to a ``Model``; the QUBO
  is ``Model.to_unconstrained_poly().as_dict()``. (Wrapping the penalty in Amplify's
  ``Constraint(penalty, eq=0, penalty=penalty)`` gives the same QUBO, but that constructor took
  1.9 s at 30x38 and 17.7 s at 60x60, about quadratic in the terms: not usable at 100x100.)
- ``jijmodeling``: a ``Problem.define`` model with a ``Placeholder`` ``lam`` multiplying the
  penalty in the objective (an OMMX equality constraint would be penalised by its square, a
  quartic: another model), ``Problem.eval(data)`` to an OMMX instance, then ``to_qubo()``.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROUTES = ("registered", "user", "pyqubo", "amplify", "jijmodeling")
MODELS = ("formulation1", "formulation2")


@dataclass
class Built:
    """One route's model for one weight: timings, sizes, energies, re-weighting."""

    compile_s: float
    to_bqm_s: float
    variables: int
    interactions: int
    reweight: Callable[[float], Any]
    energies: Callable[[np.ndarray, list[str]], np.ndarray]
    handle: Any = None
    #: interactions with a nonzero coefficient, where the route also stores zeros
    nonzero_interactions: int | None = None


def _f(z: Any, a: Any, b: Any) -> Any:
    """The product penalty ``f(z, a, b) = ab - 2az - 2bz + 3z`` (0 iff ``z = ab``)."""
    return a * b - 2 * a * z - 2 * b * z + 3 * z


# -- bmfdsl --------------------------------------------------------------------------------------
def _bmfdsl(target: Any) -> Callable[[str, np.ndarray, int, float], Built]:
    def build(model: str, A: np.ndarray, r: int, lam: float) -> Built:
        from bmfdsl import compile_model

        source = target(model) if callable(target) else model
        start = time.perf_counter()
        compiled = compile_model(source, A, r)
        compiled_at = time.perf_counter()
        bqm = compiled.to_bqm(lam=lam)
        done = time.perf_counter()

        def energies(X: np.ndarray, labels: list[str]) -> np.ndarray:
            return np.asarray(bqm.energies((X, labels)), dtype=float)

        return Built(
            compiled_at - start,
            done - compiled_at,
            bqm.num_variables,
            bqm.num_interactions,
            lambda weight: compiled.to_bqm(lam=weight),
            energies,
            handle=(compiled, bqm),
        )

    return build


class UserScript:
    """A copy of the registered model's script in a temporary directory, passed by path."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="bmfdsl_bench_"))

    def __call__(self, model: str) -> str:
        path = self.directory / f"my_{model}.py"
        if not path.exists():
            spec = importlib.util.find_spec(f"bmfdsl.models.{model}")
            assert spec is not None and spec.origin is not None
            shutil.copyfile(spec.origin, path)
        return str(path)

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


# -- PyQUBO --------------------------------------------------------------------------------------
def _pyqubo(model: str, A: np.ndarray, r: int, lam: float) -> Built:
    from pyqubo import Array, Constraint, Placeholder

    m, n = A.shape
    a = A.tolist()
    start = time.perf_counter()
    U = Array.create("U", shape=(m, r), vartype="BINARY")
    V = Array.create("V", shape=(n, r), vartype="BINARY")
    L = Placeholder("lam")
    if model == "formulation1":
        W = Array.create("W", shape=(r, m, n), vartype="BINARY")
        objective = sum(
            (a[i][j] - sum(W[k, i, j] for k in range(r))) ** 2 for i in range(m) for j in range(n)
        )
        penalty = sum(
            _f(W[k, i, j], U[i, k], V[j, k]) for k in range(r) for i in range(m) for j in range(n)
        )
        H = objective + Constraint(L * penalty, label="W")
    else:
        UU = Array.create("UU", shape=(m, r, r), vartype="BINARY")
        VV = Array.create("VV", shape=(n, r, r), vartype="BINARY")
        objective = (
            sum(a[i][j] for i in range(m) for j in range(n))
            - 2
            * sum(a[i][j] * U[i, k] * V[j, k] for i in range(m) for j in range(n) for k in range(r))
            + sum(
                UU[i, k, l] * VV[j, k, l]
                for i in range(m)
                for j in range(n)
                for k in range(r)
                for l in range(r)
            )
        )
        pen_u = sum(
            _f(UU[i, k, l], U[i, k], U[i, l]) for i in range(m) for k in range(r) for l in range(r)
        )
        pen_v = sum(
            _f(VV[j, k, l], V[j, k], V[j, l]) for j in range(n) for k in range(r) for l in range(r)
        )
        H = objective + Constraint(L * pen_u, label="UU") + Constraint(L * pen_v, label="VV")
    compiled = H.compile()
    compiled_at = time.perf_counter()
    bqm = compiled.to_bqm(feed_dict={"lam": lam})
    done = time.perf_counter()

    def energies(X: np.ndarray, labels: list[str]) -> np.ndarray:
        position = {label: index for index, label in enumerate(labels)}
        order = [position[v] for v in bqm.variables]
        return np.asarray(bqm.energies((X[:, order], list(bqm.variables))), dtype=float)

    _, quadratic, _ = bqm.to_numpy_vectors()
    return Built(
        compiled_at - start,
        done - compiled_at,
        bqm.num_variables,
        bqm.num_interactions,
        lambda weight: compiled.to_bqm(feed_dict={"lam": weight}),
        energies,
        handle=(compiled, bqm),
        nonzero_interactions=int(np.count_nonzero(quadratic[2])),
    )


# -- QUBO dictionaries (Amplify, OMMX) ----------------------------------------------------------
class DictQubo:
    """A QUBO ``{(): c, (i,): a_i, (i, j): b_ij}`` over peer ids, evaluated in our label order."""

    def __init__(self, terms: dict[tuple[int, ...], float], id_label: dict[int, str]) -> None:
        self.constant = 0.0
        lin_ids, lin_vals, row_ids, col_ids, quad_vals = [], [], [], [], []
        for key, value in terms.items():
            if len(key) == 0:
                self.constant += value
            elif len(key) == 1 or key[0] == key[1]:
                lin_ids.append(key[0])
                lin_vals.append(value)
            elif len(key) == 2:
                row_ids.append(key[0])
                col_ids.append(key[1])
                quad_vals.append(value)
            else:
                raise ValueError(f"term of degree {len(key)} in a QUBO: {key}")
        self.id_label = id_label
        self.lin_ids = np.asarray(lin_ids, dtype=np.int64)
        self.lin_vals = np.asarray(lin_vals, dtype=float)
        self.row_ids = np.asarray(row_ids, dtype=np.int64)
        self.col_ids = np.asarray(col_ids, dtype=np.int64)
        self.quad_vals = np.asarray(quad_vals, dtype=float)
        ids = np.concatenate([self.lin_ids, self.row_ids, self.col_ids])
        self.variables = int(np.unique(ids).size)
        pairs = np.unique(np.sort(np.stack([self.row_ids, self.col_ids]), axis=0), axis=1)
        self.interactions = int(pairs.shape[1])

    def energies(self, X: np.ndarray, labels: list[str]) -> np.ndarray:
        position = {label: index for index, label in enumerate(labels)}
        column = np.zeros(max(self.id_label) + 1, dtype=np.int64)
        for peer_id, label in self.id_label.items():
            column[peer_id] = position[label]
        Y = np.asarray(X, dtype=float)
        out = np.full(Y.shape[0], self.constant)
        out += Y[:, column[self.lin_ids]] @ self.lin_vals
        out += (Y[:, column[self.row_ids]] * Y[:, column[self.col_ids]]) @ self.quad_vals
        return out


def _label(name: str, subscripts: Any) -> str:
    return name + "".join(f"[{int(s)}]" for s in subscripts)


_AMPLIFY_NAME = re.compile(r"^([A-Za-z]+)_\{([0-9,]+)\}$")


def _amplify(model: str, A: np.ndarray, r: int, lam: float) -> Built:
    from amplify import Model, VariableGenerator, newaxis

    m, n = A.shape
    a = A.astype(float)
    start = time.perf_counter()
    gen = VariableGenerator()
    U = gen.array("Binary", shape=(m, r), name="U")
    V = gen.array("Binary", shape=(n, r), name="V")
    if model == "formulation1":
        W = gen.array("Binary", shape=(r, m, n), name="W")
        objective = ((a - W.sum(axis=0)) ** 2).sum()
        Uk = U.T[:, :, newaxis]  # (r, m, 1)
        Vk = V.T[:, newaxis, :]  # (r, 1, n)
        penalty = _f(W, Uk, Vk).sum()
    else:
        UU = gen.array("Binary", shape=(m, r, r), name="UU")
        VV = gen.array("Binary", shape=(n, r, r), name="VV")
        cross = (a * (U @ V.T)).sum()
        square = (UU.reshape((m, r * r)) @ VV.reshape((n, r * r)).T).sum()
        objective = float(a.sum()) - 2 * cross + square
        penalty = (
            _f(UU, U[:, :, newaxis], U[:, newaxis, :]).sum()
            + _f(VV, V[:, :, newaxis], V[:, newaxis, :]).sum()
        )

    def weighted(weight: float) -> Any:
        return Model(objective + weight * penalty)

    amplify_model = weighted(lam)
    compiled_at = time.perf_counter()
    terms = amplify_model.to_unconstrained_poly().as_dict()
    done = time.perf_counter()

    def energies(X: np.ndarray, labels: list[str]) -> np.ndarray:
        id_label = {}
        for variable in gen.variables:
            match = _AMPLIFY_NAME.match(variable.name)
            assert match is not None, variable.name
            id_label[variable.id] = _label(match[1], match[2].split(","))
        return DictQubo(terms, id_label).energies(X, labels)

    variables = {i for key in terms for i in key}
    interactions = sum(1 for key in terms if len(key) == 2)
    return Built(
        compiled_at - start,
        done - compiled_at,
        len(variables),
        interactions,
        lambda weight: weighted(weight).to_unconstrained_poly().as_dict(),
        energies,
        handle=terms,
    )


def _jijmodeling(model: str, A: np.ndarray, r: int, lam: float) -> Built:
    from _compile_jm import problem_for

    a = A.astype(float)
    start = time.perf_counter()
    problem = problem_for(model)
    instance = problem.eval({"A": a, "r": r, "lam": lam})
    compiled_at = time.perf_counter()
    qubo, constant = instance.to_qubo()
    done = time.perf_counter()

    def reweight(weight: float) -> Any:
        return problem.eval({"A": a, "r": r, "lam": weight}).to_qubo()

    def energies(X: np.ndarray, labels: list[str]) -> np.ndarray:
        id_label = {v.id: _label(v.name, v.subscripts) for v in instance.decision_variables}
        terms: dict[tuple[int, ...], float] = {(): float(constant)}
        terms.update({tuple(key): float(value) for key, value in qubo.items()})
        return DictQubo(terms, id_label).energies(X, labels)

    variables = {i for key in qubo for i in key}
    interactions = sum(1 for i, j in qubo if i != j)
    return Built(
        compiled_at - start,
        done - compiled_at,
        len(variables),
        interactions,
        reweight,
        energies,
        handle=(qubo, constant),
    )


def builder(route: str, user_script: UserScript | None = None) -> Callable[..., Built]:
    """The build function of ``route``: ``build(model, A, r, lam) -> Built``."""
    if route == "registered":
        return _bmfdsl(None)
    if route == "user":
        assert user_script is not None
        return _bmfdsl(user_script)
    return {"pyqubo": _pyqubo, "amplify": _amplify, "jijmodeling": _jijmodeling}[route]


def warm_imports(route: str) -> None:
    """Import what ``route`` needs before the baseline memory is read."""
    import bmfdsl  # noqa: F401  (the energy check needs it in every route)

    if route == "pyqubo":
        import pyqubo  # noqa: F401
    elif route == "amplify":
        import amplify  # noqa: F401
    elif route == "jijmodeling":
        import jijmodeling  # noqa: F401
        import ommx.v1  # noqa: F401

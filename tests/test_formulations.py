"""The compiled formulations against the paper's closed forms, brute force and each other."""

from __future__ import annotations

import itertools

import dimod
import numpy as np
import pytest

from bmfdsl.modeling import compile_model

RNG = np.random.default_rng(20211)
MODELS = ["formulation1", "formulation2", "formulation2-reduced"]


def random_binary(m: int, n: int, density: float = 0.5) -> np.ndarray:
    return (RNG.random((m, n)) < density).astype(np.int8)


def kron(*factors: np.ndarray) -> np.ndarray:
    out = np.ones((1, 1))
    for factor in factors:
        out = np.kron(out, factor)
    return out


def ones(rows: int, cols: int | None = None) -> np.ndarray:
    return np.ones((rows, rows if cols is None else cols))


def vec(M: np.ndarray) -> np.ndarray:
    """The paper's vec: stack the columns."""
    return M.reshape(-1, order="F")


def paper_q(A: np.ndarray, r: int, lam: float) -> np.ndarray:
    """Q of Formulation 1 (paper eq. for Q, Q^(1), Q^(2), Q^(3)), variables x = [u; v; w1..wr]."""
    m, n = A.shape
    Z = np.zeros
    Q1 = (
        lam
        / 2
        * np.block(
            [
                [Z((m * r, m * r)), kron(np.eye(r), ones(m, n))],
                [kron(np.eye(r), ones(n, m)), Z((n * r, n * r))],
            ]
        )
    )
    Q2 = (
        -2
        * lam
        * np.vstack([kron(np.eye(r), ones(1, n), np.eye(m)), kron(np.eye(n * r), ones(1, m))])
    )
    Q3 = (
        kron(ones(r), np.eye(m * n))
        - 2 * np.diag(kron(ones(r, 1), np.eye(m * n)) @ vec(A))
        + 3 * lam * np.eye(m * n * r)
    )
    return np.block([[Q1, Q2], [Z((m * n * r, (m + n) * r)), Q3]])


def paper_p(A: np.ndarray, r: int, lam: float) -> np.ndarray:
    """P of Formulation 2, variables y = [u; v; ũ; ṽ]."""
    m, n = A.shape
    Z = np.zeros
    P1 = np.block(
        [
            [lam * kron(ones(r), np.eye(m)), -2 * kron(np.eye(r), A)],
            [Z((n * r, m * r)), lam * kron(ones(r), np.eye(n))],
        ]
    )
    P2 = -2 * lam * np.block(
        [
            [kron(ones(1, r), np.eye(m * r)), Z((m * r, n * r * r))],
            [Z((n * r, m * r * r)), kron(ones(1, r), np.eye(n * r))],
        ]
    ) - 2 * lam * np.block(
        [
            [kron(np.eye(r), ones(1, r), np.eye(m)), Z((m * r, n * r * r))],
            [Z((n * r, m * r * r)), kron(np.eye(r), ones(1, r), np.eye(n))],
        ]
    )
    P3 = np.block(
        [
            [3 * lam * np.eye(m * r * r), kron(np.eye(r * r), ones(m, n))],
            [Z((n * r * r, m * r * r)), 3 * lam * np.eye(n * r * r)],
        ]
    )
    size = (m + n) * (r + r * r)
    return np.block([[P1, P2], [Z((size - (m + n) * r, (m + n) * r)), P3]])


def paper_c(m: int, n: int, r: int, lam: float) -> np.ndarray:
    """The one-hot matrix C on the [u; v] block."""
    C = np.zeros(((m + n) * r, (m + n) * r))
    C[m * r :, m * r :] = lam * (kron(ones(r), np.eye(n)) - 2 * np.eye(n * r))
    return C


def bqm_as_upper_matrix(bqm: dimod.BinaryQuadraticModel, order: list[str]) -> np.ndarray:
    """Linear biases on the diagonal, each interaction once above it."""
    index = {label: k for k, label in enumerate(order)}
    M = np.zeros((len(order), len(order)))
    for label, bias in bqm.linear.items():
        M[index[label], index[label]] = bias
    for (u, v), bias in bqm.quadratic.items():
        i, j = sorted((index[u], index[v]))
        M[i, j] += bias
    return M


def symmetrized_upper(Q: np.ndarray) -> np.ndarray:
    """The same quadratic form with each off-diagonal pair folded above the diagonal."""
    return np.triu(Q + Q.T, 1) + np.diag(np.diag(Q))


def formulation1_order(m: int, n: int, r: int) -> list[str]:
    return (
        [f"U[{i}][{k}]" for k in range(r) for i in range(m)]
        + [f"V[{j}][{k}]" for k in range(r) for j in range(n)]
        + [f"W[{k}][{i}][{j}]" for k in range(r) for j in range(n) for i in range(m)]
    )


def formulation2_order(m: int, n: int, r: int) -> list[str]:
    pairs = [(k, l) for l in range(r) for k in range(r)]  # column k + l r
    return (
        [f"U[{i}][{k}]" for k in range(r) for i in range(m)]
        + [f"V[{j}][{k}]" for k in range(r) for j in range(n)]
        + [f"UU[{i}][{k}][{l}]" for k, l in pairs for i in range(m)]
        + [f"VV[{j}][{k}][{l}]" for k, l in pairs for j in range(n)]
    )


CASES = [(2, 3, 1, 1.0, 0.5), (3, 2, 2, 1.0, 2.0), (3, 4, 2, 0.7, 1.3), (4, 3, 3, 2.5, 0.25)]


@pytest.mark.parametrize(("m", "n", "r", "lam", "lam_onehot"), CASES)
@pytest.mark.parametrize("one_hot", [None, "V"])
def test_formulation1_equals_paper_q(m, n, r, lam, lam_onehot, one_hot):
    A = random_binary(m, n)
    compiled = compile_model("formulation1", A, r, one_hot=one_hot)
    weights = {"lam": lam} | ({"lam_onehot": lam_onehot} if one_hot else {})
    bqm = compiled.to_bqm(**weights)
    Q = paper_q(A, r, lam)
    expected_offset = A.sum()
    if one_hot:  # Q' adds C to the [u; v] block; the constant λ n keeps energy == error
        Q[: (m + n) * r, : (m + n) * r] += paper_c(m, n, r, lam_onehot)
        expected_offset += lam_onehot * n
    order = formulation1_order(m, n, r)
    assert set(bqm.variables) == set(order)
    np.testing.assert_allclose(bqm_as_upper_matrix(bqm, order), symmetrized_upper(Q), atol=1e-12)
    assert bqm.offset == pytest.approx(expected_offset)


@pytest.mark.parametrize(("m", "n", "r", "lam", "lam_onehot"), CASES)
@pytest.mark.parametrize("one_hot", [None, "V"])
def test_formulation2_equals_paper_p(m, n, r, lam, lam_onehot, one_hot):
    A = random_binary(m, n)
    compiled = compile_model("formulation2", A, r, one_hot=one_hot)
    weights = {"lam": lam} | ({"lam_onehot": lam_onehot} if one_hot else {})
    bqm = compiled.to_bqm(**weights)
    P = paper_p(A, r, lam)
    expected_offset = A.sum()
    if one_hot:
        P[: (m + n) * r, : (m + n) * r] += paper_c(m, n, r, lam_onehot)
        expected_offset += lam_onehot * n
    order = formulation2_order(m, n, r)
    assert set(bqm.variables) == set(order)
    np.testing.assert_allclose(bqm_as_upper_matrix(bqm, order), symmetrized_upper(P), atol=1e-12)
    assert bqm.offset == pytest.approx(expected_offset)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("one_hot", [None, "V", "U"])
def test_to_bqm_equals_the_pyqubo_twin(model, one_hot):
    for m, n, r in [(1, 1, 1), (2, 5, 2), (5, 2, 2), (4, 4, 3), (3, 6, 3)]:
        A = random_binary(m, n, density=RNG.choice([0.0, 0.3, 0.7, 1.0]))
        compiled = compile_model(model, A, r, one_hot=one_hot)
        twin = compiled.to_pyqubo().compile()
        for lam in (0.3, 1.0, 7.0):
            weights = {"lam": lam} | ({"lam_onehot": 2 * lam} if one_hot else {})
            ours, theirs = compiled.to_bqm(**weights), twin.to_bqm(feed_dict=weights)
            assert set(ours.variables) == set(theirs.variables), (model, m, n, r)
            assert ours.is_almost_equal(theirs), (model, one_hot, m, n, r, lam)


@pytest.mark.parametrize("model", MODELS)
def test_feasible_energy_equals_squared_error(model):
    for m, n, r, one_hot in [(4, 5, 2, None), (5, 3, 3, "V"), (3, 4, 2, "U")]:
        A = random_binary(m, n)
        compiled = compile_model(model, A, r, one_hot=one_hot)
        bqm = compiled.to_bqm(lam=1.7)
        for _ in range(5):
            U = RNG.integers(0, 2, (m, r))
            V = RNG.integers(0, 2, (n, r))
            if one_hot == "V":
                V = np.eye(r, dtype=int)[RNG.integers(0, r, n)]
            if one_hot == "U":
                U = np.eye(r, dtype=int)[RNG.integers(0, r, m)]
            error = int(((A - U @ V.T) ** 2).sum())
            assert bqm.energy(compiled.encode(U, V)) == pytest.approx(error)


def brute_force_bmf(A: np.ndarray, r: int, one_hot: str | None = None) -> int:
    """min ||A - UVᵀ||² by enumerating every U and V (tiny inputs only)."""
    m = A.shape[0]
    codes = np.array(list(itertools.product((0, 1), repeat=r)))
    if one_hot:
        codes = codes[codes.sum(axis=1) == 1]
    u_codes = codes if one_hot == "U" else np.array(list(itertools.product((0, 1), repeat=r)))
    best = None
    for U in itertools.product(range(len(u_codes)), repeat=m):
        Umat = u_codes[list(U)]
        # For fixed U the best V is a BLS per column of A.
        if one_hot == "V":
            candidates = codes
        else:
            candidates = np.array(list(itertools.product((0, 1), repeat=r)))
        errors = ((A.T[:, None, :] - (candidates @ Umat.T)[None]) ** 2).sum(axis=2)
        total = int(errors.min(axis=1).sum())
        best = total if best is None else min(best, total)
    return int(best)


def ground_states(bqm: dimod.BinaryQuadraticModel) -> tuple[float, np.ndarray, list]:
    """All minimum-energy states by exhaustive enumeration (vectorised, <= 24 variables)."""
    labels = list(bqm.variables)
    N = len(labels)
    dense = bqm_as_upper_matrix(bqm, labels)
    linear = np.diag(dense).astype(np.float32)
    upper = np.triu(dense, 1).astype(np.float32)
    best_energy = np.inf
    best_states: list[np.ndarray] = []
    chunk = 1 << min(N, 20)
    for start in range(0, 1 << N, chunk):
        ints = np.arange(start, start + chunk, dtype=np.int64)
        X = ((ints[:, None] >> np.arange(N)) & 1).astype(np.float32)
        energies = X @ linear + np.einsum("si,si->s", X @ upper, X) + bqm.offset
        low = energies.min()
        if low < best_energy - 1e-3:
            best_energy, best_states = low, []
        if low <= best_energy + 1e-3:
            best_states.extend(X[np.abs(energies - best_energy) <= 1e-3])
    return float(best_energy), np.array(best_states), labels


@pytest.mark.parametrize(
    ("model", "m", "n", "r", "one_hot"),
    [
        ("formulation1", 2, 2, 1, None),
        ("formulation1", 2, 2, 2, None),
        ("formulation1", 2, 3, 1, None),
        ("formulation1", 2, 2, 2, "V"),
        ("formulation2", 2, 2, 1, None),
        ("formulation2", 2, 3, 1, "V"),
        ("formulation2", 2, 2, 2, "V"),
        ("formulation2-reduced", 2, 3, 2, None),
        ("formulation2-reduced", 3, 3, 2, "V"),
    ],
)
def test_minimizers_decode_to_optimal_bmf(model, m, n, r, one_hot):
    """Propositions 1 and 2: with lam > 2r||A||², every QUBO minimizer is an optimal BMF."""
    rounds = 1 if (m + n) * (r + r * r) > 20 and model == "formulation2" else 3
    for _ in range(rounds):
        A = random_binary(m, n, density=0.6)
        lam = 2 * r * A.sum() + 1.0
        compiled = compile_model(model, A, r, one_hot=one_hot)
        bqm = compiled.to_bqm(lam=lam)
        assert bqm.num_variables <= 24
        energy, states, labels = ground_states(bqm)
        optimum = brute_force_bmf(A, r, one_hot)
        assert energy == pytest.approx(optimum)
        sampleset = dimod.SampleSet.from_samples_bqm((states.astype(np.int8), labels), bqm)
        for decoded in compiled.decode(sampleset, lam=lam):
            assert decoded.feasible
            assert decoded.error == optimum
            if one_hot == "V":
                assert (decoded.V.sum(axis=1) == 1).all()


def test_exact_solver_agrees_on_a_tiny_instance():
    A = np.array([[1, 0], [1, 1]])
    compiled = compile_model("formulation1", A, 1)
    bqm = compiled.to_bqm(lam=2 * A.sum() + 1)
    best = compiled.decode(dimod.ExactSolver().sample(bqm), lam=2 * A.sum() + 1)[0]
    assert best.error == brute_force_bmf(A, 1) == 1
    assert best.feasible

"""Arguments that used to be read wrongly in silence or fail with the wrong exception type."""

from __future__ import annotations

import gzip

import dimod
import numpy as np
import pytest

from bmfdsl import factorize
from bmfdsl.apps import load_melanoma, load_mnist
from bmfdsl.apps._datafiles import read_idx
from bmfdsl.errors import (
    BmfdslError,
    InvalidMatrixError,
    InvalidParameterError,
    UnknownNameError,
)
from bmfdsl.solvers import get_backend

A = np.array([[1, 1, 0], [1, 1, 0], [0, 1, 1]])


@pytest.mark.parametrize("num_reads", [2.5, "3", True, -1])
def test_a_fractional_or_non_integer_num_reads_is_refused_not_truncated(num_reads):
    with pytest.raises(InvalidParameterError, match="num_reads"):
        factorize(A, 2, random_state=0, num_reads=num_reads)


def test_a_backend_seed_without_random_state_is_refused():
    """seed= alone would seed the backend only: the answer would change from call to call."""
    with pytest.raises(InvalidParameterError, match="random_state=0"):
        factorize(A, 2, seed=0)
    assert factorize(A, 2, seed=None).U.shape == (3, 2)  # a wrapper forwarding no seed
    both = [factorize(A, 2, seed=0, random_state=1).U for _ in range(2)]
    assert np.array_equal(*both)


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("random_seed", "random_state"), ("sampl_rows", "sample_rows"), ("num_read", "num_reads")],
)
def test_a_mistyped_factorize_keyword_is_matched_against_its_own_keywords(typo, meant):
    with pytest.raises(UnknownNameError, match=f"(?i)did you mean {meant!r}") as raised:
        factorize(A, 2, random_state=0, **{typo: 3})
    assert {"random_state", "sample_rows", "num_reads", "lam"} <= set(raised.value.known)


def test_num_reads_is_checked_on_an_empty_model_too():
    empty = dimod.BinaryQuadraticModel("BINARY")
    with pytest.raises(InvalidParameterError, match="num_reads"):
        get_backend("neal").sample(empty, num_reads=2.5)
    assert len(get_backend("neal").sample(empty, num_reads=3)) == 3


def test_an_integral_num_reads_still_works():
    result = factorize(A, 2, random_state=0, num_reads=np.int64(2))
    assert result.error == 0


@pytest.mark.parametrize("als", ["no", "False", 0, 1, None])
def test_als_must_be_a_bool(als):
    with pytest.raises(InvalidParameterError, match="als must be True or False"):
        factorize(A, 2, random_state=0, als=als)


def test_als_accepts_numpy_bools():
    without = factorize(A, 2, random_state=0, als=np.bool_(False))
    assert "als" not in without.info["timings"]


@pytest.mark.parametrize("backend", [42, 3.5, ["neal"], object()])
def test_a_backend_that_is_neither_a_name_nor_a_sampler_is_a_typed_error(backend):
    with pytest.raises(InvalidParameterError, match="backend must be") as caught:
        factorize(A, 2, backend=backend)
    assert isinstance(caught.value, BmfdslError) and isinstance(caught.value, ValueError)


def test_an_empty_melanoma_file_is_a_typed_error(tmp_path):
    path = tmp_path / "bittner-2000_database.txt"
    for content in ("", "\n\n", "name\tS1\tS2\n"):
        path.write_text(content)
        with pytest.raises(InvalidMatrixError, match="expected a name row"):
            load_melanoma(path)


def _idx(array: np.ndarray) -> bytes:
    return bytes([0, 0, 8, array.ndim]) + np.array(array.shape, ">u4").tobytes() + array.tobytes()


def test_a_truncated_mnist_gzip_is_a_typed_error(tmp_path):
    images = np.zeros((20, 28, 28), dtype=np.uint8)
    packed = gzip.compress(_idx(images))
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(packed[: len(packed) // 2])
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(np.zeros(20, "u1"))))
    with pytest.raises(InvalidMatrixError, match="truncated or corrupt gzip"):
        load_mnist(tmp_path, per_digit=1)


@pytest.mark.parametrize("data", [b"\x1f\x8b" + b"\x00" * 30, bytes([0, 0, 8, 3, 0, 0])])
def test_corrupt_idx_files_are_typed_errors(tmp_path, data):
    path = tmp_path / "x.idx"
    path.write_bytes(data)
    with pytest.raises(InvalidMatrixError):
        read_idx(path)


# --- issue 24 item 2: the native solver's settings are checked before use ----------------


@pytest.mark.parametrize("time_limit", [-1, 0, float("nan"), float("inf"), True, "1"])
def test_item2_native_rejects_nan_time_limit(time_limit):
    with pytest.raises(InvalidParameterError, match="time_limit must be a finite number > 0"):
        factorize(A, 2, backend="native", time_limit=time_limit, random_state=0)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("t_hot", float("inf")),
        ("t_cold", float("nan")),
        ("sweeps", "x"),
        ("replicas", 2.5),
        ("work_limit", float("inf")),
        ("num_reads", -1),  # 0 is valid: the seeds only
        ("patience", True),
        ("initial_factors", "garbage"),
        ("initial_factors", [(np.ones((3, 2)), np.full((3, 2), 2))]),
    ],
)
def test_item2_native_settings_name_the_parameter(setting, value):
    with pytest.raises(InvalidParameterError, match=setting):
        factorize(A, 2, backend="native", random_state=0, **{setting: value})


@pytest.mark.parametrize(
    ("setting", "value"),
    [("num_solutions", 2.5), ("num_reads", 0), ("initial_factors", "garbage"), ("sweeps", 9)],
)
def test_item2_native_checks_a_masked_models_settings_too(setting, value):
    mask = np.ones_like(A)
    mask[0, 0] = 0
    with pytest.raises(InvalidParameterError, match=setting):
        factorize(A, 2, mask=mask, backend="native", random_state=0, **{setting: value})


def test_item2_neal_refuses_a_nan_time_limit_that_would_never_end():
    with pytest.raises(InvalidParameterError, match="time_limit"):
        factorize(A, 2, backend="neal", time_limit=float("nan"), random_state=0)


def test_item2_the_cli_refuses_a_nan_time_limit_and_negative_reads(tmp_path, capsys):
    from bmfdsl.apps import _cli as cli

    (tmp_path / "a.csv").write_text("1,1,0\n1,1,0\n0,1,1\n")
    argv = ["factorize", str(tmp_path / "a.csv"), "-r", "2", "--out", str(tmp_path / "o")]
    for extra in (["--time-limit", "nan"], ["--num-reads", "-1"]):
        assert cli.main([*argv, *extra]) != 0
        assert extra[0].removeprefix("--").replace("-", "_") in capsys.readouterr().err


# --- issue 24 item 3: a compiled model keeps its own copy of the data ---------------------


def test_item3_compiled_model_is_unaffected_by_later_changes_to_A():
    from bmfdsl.modeling import compile_model

    data = np.array(A, dtype=np.int8)  # int8 C-contiguous: the checks would pass it through
    mask = np.ones_like(data)
    compiled = compile_model("formulation1", data, 2)
    masked = compile_model("masked-bmf", data, 2, data={"mask": mask})
    before, masked_before = compiled.to_bqm(), masked.to_bqm()
    data[:] = 0
    mask[:] = 0
    assert compiled.to_bqm() == before and masked.to_bqm() == masked_before
    assert compiled.A.tolist() == A.tolist()
    with pytest.raises(ValueError, match="read-only"):
        compiled.A[0, 0] = 0


def _script(tmp_path, body: str) -> str:
    path = tmp_path / "user_model.py"
    path.write_text(body)
    return str(path)


def test_item3_a_script_writing_model_A_is_refused_and_the_caller_keeps_its_data(tmp_path):
    from bmfdsl.errors import ModelDefinitionError

    script = _script(
        tmp_path,
        "from bmfdsl.models import formulation1\n"
        "def build(model):\n"
        "    model.A[:] = 0\n"
        "    formulation1.build(model)\n",
    )
    data = np.array(A, dtype=np.int8)
    with pytest.raises(ModelDefinitionError, match="read-only") as caught:
        factorize(data, 2, model=script, random_state=0)
    assert script in str(caught.value)
    assert data.tolist() == A.tolist()


# --- issue 24 item 11: a script's sys.exit or MemoryError is a ModelDefinitionError --------


@pytest.mark.parametrize(
    ("body", "raised"),
    [
        ("import sys\nsys.exit(4)\n", "SystemExit"),
        ("raise SystemExit('bye')\n", "SystemExit"),
        ("raise MemoryError('user')\n", "MemoryError"),
        ("def build(model):\n    raise SystemExit(3)\n", "SystemExit"),
        ("def build(model):\n    raise MemoryError('in build')\n", "MemoryError"),
    ],
)
def test_item11_model_script_exit_becomes_model_definition_error(tmp_path, body, raised):
    from bmfdsl.errors import ModelDefinitionError

    script = _script(tmp_path, body)
    with pytest.raises(ModelDefinitionError, match=raised) as caught:
        factorize(A, 2, model=script, random_state=0)
    assert script in str(caught.value)


def test_item11_a_keyboard_interrupt_in_a_script_still_interrupts(tmp_path):
    script = _script(tmp_path, "def build(model):\n    raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        factorize(A, 2, model=script, random_state=0)


# --- issue 24 item 14: typed errors that name the argument ---------------------------------


def test_item14_a_negative_random_state_is_a_typed_error():
    with pytest.raises(InvalidParameterError, match="random_state must be None, an int >= 0"):
        factorize(A, 2, random_state=-1)


@pytest.mark.parametrize("weights", [[1, 2], "lam=2", {1: 2.0}])
def test_item14_weights_must_be_a_dict(weights):
    with pytest.raises(InvalidParameterError, match="weights must be a dict"):
        factorize(A, 2, weights=weights, random_state=0)


def test_item14_a_sampler_class_is_refused_with_how_to_instantiate_it():
    expected = r"instantiate it, e.g. backend=ExactSolver\(\)"
    with pytest.raises(InvalidParameterError, match=expected):
        factorize(A, 2, backend=dimod.ExactSolver, random_state=0)


def test_item14_a_dask_array_of_unknown_chunks_is_a_typed_error():
    da = pytest.importorskip("dask.array")
    data = da.from_array(np.tile(A, (4, 1)), chunks=5)
    unknown = data[data[:, 0] >= 0]  # boolean indexing: chunk sizes unknown until computed
    with pytest.raises(InvalidMatrixError, match="compute_chunk_sizes"):
        factorize(unknown, 2, random_state=0)
    assert factorize(unknown.compute_chunk_sizes(), 2, random_state=0).error == 0


def test_nan_marks_a_missing_entry_where_the_mask_says_missing():
    """NaN where mask= is 0 reads as missing; NaN where it is 1 is refused, and the message
    names both ways of marking missing entries."""
    data = np.array([[1.0, 1.0, 0.0], [1.0, np.nan, 0.0], [0.0, 1.0, 1.0]])
    mask = np.ones(data.shape, dtype=np.int8)
    mask[1, 1] = 0
    result = factorize(data, 2, mask=mask, random_state=0)
    assert result.error == factorize(np.nan_to_num(data), 2, mask=mask, random_state=0).error
    as_list = factorize(data.tolist(), 2, mask=mask, random_state=0)
    assert np.array_equal(as_list.U, result.U) and np.array_equal(as_list.V, result.V)
    with pytest.raises(InvalidMatrixError, match=r"mask=M\) or np\.ma\.masked_invalid"):
        factorize(data, 2, random_state=0)
    with pytest.raises(InvalidMatrixError, match="NaN"):
        factorize(data, 2, mask=np.ones(data.shape), random_state=0)


@pytest.mark.parametrize("method", ["baseline", "thresholded", "penalized"])
def test_a_comparison_method_with_a_backend_is_refused_not_ignored(method):
    with pytest.raises(InvalidParameterError, match="drop backend="):
        factorize(A, 2, method=method, backend="neal", random_state=0)
    assert factorize(A, 2, method=method, random_state=0).info["method"] == method

"""Compile a model (registered name or user script) for one data matrix and rank.

Registered and user models take the same route: the script's ``build(model)`` runs on the
instance, its declaration is lowered to QUBO arrays with numpy, and a structure claim
(``model.declare_bmf()``) is checked before structure-aware solvers may use it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from bmfdsl.errors import (
    InvalidParameterError,
    ModelDefinitionError,
    ModelTooLargeError,
    warn_caller,
)
from bmfdsl.modeling._compiled import CompiledModel, Lowered, claimed_structure, verify_claim
from bmfdsl.modeling._declaration import Declaration
from bmfdsl.modeling._dsl import ModelBuilder
from bmfdsl.modeling._expr import TERM_BYTES
from bmfdsl.modeling._residual import check_entry_array
from bmfdsl.modeling._structure import BMFStructure, OneHotSide
from bmfdsl.registry import Registry, import_target
from bmfdsl.validation import check_binary_matrix, check_one_hot, check_rank

#: Registered models by name: the module (``"package.module"``) of each script. Third
#: parties add theirs in the entry-point group ``bmfdsl.models`` (name -> module).
MODELS: Registry[str] = Registry(
    "model",
    "bmfdsl.models",
    {
        "formulation1": "bmfdsl.models.formulation1",
        "formulation2": "bmfdsl.models.formulation2",
        "formulation2-reduced": "bmfdsl.models.formulation2_reduced",
        "masked-bmf": "bmfdsl.models.masked_bmf",
        "weighted-bmf": "bmfdsl.models.weighted_bmf",
        "boolean-bmf": "bmfdsl.models.boolean_bmf",
        "bicluster": "bmfdsl.models.bicluster",
        "xor-bmf": "bmfdsl.models.xor_bmf",
        "sparse-bmf": "bmfdsl.models.sparse_bmf",
        "at-most-k-bmf": "bmfdsl.models.at_most_k_bmf",
        "symmetric-bmf": "bmfdsl.models.symmetric_bmf",
    },
    str,
    hint="Or pass the path of a model script (.py)",
)

#: Default size guard: about 2 GiB of model terms.
DEFAULT_MEMORY_LIMIT = 2 * 2**30
#: Instances with at most this many ``m * n * rank`` cells are built (and checked) at once;
#: larger ones are checked on sub-instances and built (and checked again) only when a BQM
#: is asked for, so structure-aware solvers never pay for a model they do not use.
EAGER_CELLS = 100_000
#: The same for the package's own models (``bmfdsl.models``, checked against brute force by its
#: tests): building costs about 0.45 µs a cell (45 ms for a 100 x 200 core at rank 5, the
#: default's dask core, against 4 ms for the sub-instances), and the paper's 30 x 30 cores
#: stay below it. A model script or a third party's keeps :data:`EAGER_CELLS`, so that a wrong
#: claim is caught on the instance before a structure-aware solver trusts it.
BUILT_IN_EAGER_CELLS = 2**14
#: The sub-instances' size (rows and columns) and count for large instances.
_PROBE_SIZE = 16
_PROBES = 2


@dataclass(frozen=True)
class ModelInfo:
    """A registered model: its name, module and one-line description."""

    name: str
    module: str
    description: str


def list_models() -> list[ModelInfo]:
    """The registered models: the built-ins, then installed plug-ins (group ``bmfdsl.models``).

    >>> [info.name for info in list_models()][:3]
    ['formulation1', 'formulation2', 'formulation2-reduced']
    """
    infos = []
    for name, target in MODELS.entries().items():
        module = import_target(target)
        infos.append(ModelInfo(name, target, getattr(module, "DESCRIPTION", "")))
    return infos


def _load_script(path: Path) -> ModuleType:
    if not path.is_file():
        raise ModelDefinitionError(f"model script {str(path)!r} does not exist")
    module_name = f"bmfdsl_user_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelDefinitionError(f"cannot load {str(path)!r} as a Python model script")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    # a user's script can fail in any way, sys.exit() and MemoryError included; report it as
    # malformed (a KeyboardInterrupt still interrupts)
    except (Exception, SystemExit) as exc:
        raise ModelDefinitionError(
            f"model script {str(path)!r} failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def load_model(model: str | os.PathLike[str] | ModuleType) -> tuple[str, ModuleType]:
    """Resolve a registered name, a script path or a module to ``(name, module)``.

    A script path is imported and executed as Python: load only scripts you trust.

    Raises:
        UnknownNameError: a name that is neither registered nor an existing ``.py`` file.
        ModelDefinitionError: the script fails to load or has no callable ``build``.
    """
    if isinstance(model, ModuleType):
        name, module = getattr(model, "NAME", model.__name__), model
    elif isinstance(model, str | os.PathLike):
        text = os.fspath(model)
        registered = MODELS.find(text)
        if registered is not None:
            name, module = registered[0], import_target(registered[1])
        elif text.endswith(".py") or os.path.sep in text or Path(text).is_file():
            name, module = text, _load_script(Path(text))
        else:
            raise MODELS.unknown(text)
    else:
        raise InvalidParameterError(
            f"model must be a registered name, a script path or a module; got "
            f"{type(model).__name__}"
        )
    if not callable(getattr(module, "build", None)):
        raise ModelDefinitionError(
            f"model {name!r} has no function build(model); a model script must define "
            "`def build(model): ...` (see models/formulation1.py)"
        )
    return str(name), module


def _declare(
    module: ModuleType,
    name: str,
    A: np.ndarray,
    rank: int,
    one_hot: Any,
    data: Mapping[str, Any],
    term_limit: int,
) -> Declaration:
    """Run the script's ``build(model)`` on one instance (the only place it runs)."""
    seen = {key: _read_only(value) for key, value in data.items()}
    builder = ModelBuilder(_read_only(A), rank, one_hot, seen, term_limit=term_limit)
    try:
        result = module.build(builder)
    except (ModelDefinitionError, InvalidParameterError, ModelTooLargeError):
        raise
    except ValueError as exc:
        raise ModelDefinitionError(_failure(name, exc) + _read_only_hint(exc)) from exc
    except (Exception, SystemExit) as exc:  # MemoryError too; a KeyboardInterrupt interrupts
        raise ModelDefinitionError(_failure(name, exc)) from exc
    if result is not None:
        raise ModelDefinitionError(
            f"build(model) of model {name!r} must declare on `model` and return None; "
            f"it returned {type(result).__name__}"
        )
    builder.check_complete(f"model {name!r}")
    # the pipeline's mask (factorize(mask=)) is the objective's: a model may leave it to the
    # masked ALS; data read later (inside a declared error function) is not seen here
    unread = [key for key in builder.data.unread() if key != "mask"]
    if unread:
        asked = sorted(builder.data.asked)
        warn_caller(
            f"model {name!r} never read the data {unread} while building it (it asks for "
            f"{asked or 'no data'}); a misspelt key would be ignored",
            UserWarning,
        )
    return builder.declaration()


def _failure(name: str, exc: BaseException) -> str:
    return f"build(model) of model {name!r} failed: {type(exc).__name__}: {exc}"


def _read_only_hint(exc: ValueError) -> str:
    if "read-only" not in str(exc):
        return ""
    return (
        ". model.A and model.data are read-only (the caller's data): build(model) declares "
        "on the model; work on a copy (np.array(model.A)) to change values"
    )


@dataclass(frozen=True)
class _Instance:
    """The checked inputs of one ``compile_model`` call: what the model is declared on."""

    module: ModuleType
    name: str
    A: np.ndarray
    rank: int
    one_hot: OneHotSide | None
    data: dict[str, Any]
    term_limit: int

    def declare(self) -> Declaration:
        """Run the model script on this instance."""
        return _declare(
            self.module, self.name, self.A, self.rank, self.one_hot, self.data, self.term_limit
        )

    def restricted(self, rows: np.ndarray, cols: np.ndarray) -> _Instance:
        """The sub-instance of these rows and columns (data arrays restricted alike)."""
        return replace(
            self,
            A=self.A[np.ix_(rows, cols)],
            data=_restrict(self.data, self.A.shape, rows, cols),
        )


def _private_copy(value: Any) -> Any:
    """A copy of a numpy array (other values as they are): the compiled model keeps its own
    data, so that a caller changing ``A`` afterwards cannot change the model."""
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


def _read_only(value: Any) -> Any:
    """A read-only view of a numpy array (other values as they are): what a model script
    sees, so that writing to ``model.A`` is an error instead of a change to the data. (The
    copy itself stays writable: numba compiles its kernels once more for read-only arrays.)"""
    if not isinstance(value, np.ndarray):
        return value
    view = value.view()
    view.flags.writeable = False
    return view


def _check_data(data: Any) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping) or not all(isinstance(k, str) for k in data):
        raise InvalidParameterError("data must be a dict of name -> array, e.g. data={'M': M}")
    return dict(data)


def _restrict(
    data: Mapping[str, Any], shape: tuple[int, int], rows: np.ndarray, cols: np.ndarray
) -> dict[str, Any]:
    """Data arrays shaped like A (or like its rows or columns) restricted to a sub-instance."""
    m, n = shape
    out: dict[str, Any] = {}
    for key, value in data.items():
        array = np.asarray(value) if isinstance(value, np.ndarray | list) else None
        if array is not None and array.shape == (m, n):
            out[key] = array[np.ix_(rows, cols)]
        elif array is not None and array.shape == (m,):
            out[key] = array[rows]
        elif array is not None and array.shape == (n,) and m != n:
            out[key] = array[cols]
        else:
            out[key] = value
    return out


def compile_model(
    model: str | os.PathLike[str] | ModuleType,
    A: Any,
    rank: int,
    *,
    one_hot: str | None = None,
    data: Mapping[str, Any] | None = None,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> CompiledModel:
    """Compile ``model`` for data ``A`` and target rank ``rank``, once.

    Loading a model script imports and executes it as Python code: run only scripts you
    trust.

    Args:
        model: a registered name (see :func:`list_models`), the path of a model script that
            defines ``build(model)``, or such a module.
        A: the 0/1 data matrix (m x n). It is copied, and so are the arrays of ``data``:
            changing them afterwards does not change the model; the script and
            ``compiled.A`` / ``compiled.data`` show them read-only (a script writing to
            ``model.A`` gets a :class:`ModelDefinitionError`).
        rank: the target rank, ``1 <= rank <= min(m, n)``.
        one_hot: ``"V"`` (every column of A in exactly one cluster), ``"U"``, or ``None``.
        data: extra arrays for the script, read as ``model.data[name]`` (e.g. a mask).
        memory_limit: bytes of model terms beyond which building stops with
            :class:`~bmfdsl.errors.ModelTooLargeError` (default 2 GiB).

    Returns:
        A :class:`~bmfdsl.modeling.CompiledModel`; ``to_bqm(**weights)`` re-weights it
        without recompiling.

    A structure claim is checked on the instance itself when it has at most ``EAGER_CELLS``
    (100,000; the package's own models: ``BUILT_IN_EAGER_CELLS``, 2**14) ``m * n * rank``
    cells; a larger instance is checked on sub-instances (A and
    its data arrays restricted to random rows and columns) and its full model is built only
    when a BQM is needed, and checked then (``compiled.structure_check`` says how far).

    >>> import numpy as np
    >>> compiled = compile_model("formulation1", np.ones((3, 2)), 2, one_hot="V")
    >>> compiled.weight_names, compiled.num_variables, compiled.structure_check
    (('lam', 'lam_onehot'), 22, 'instance')
    """
    A = _private_copy(check_binary_matrix(A))
    rank = check_rank(rank, A.shape)
    one_hot = check_one_hot(one_hot)
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, int | np.integer):
        raise InvalidParameterError(f"memory_limit must be a number of bytes; got {memory_limit!r}")
    extra = {key: _private_copy(value) for key, value in _check_data(data).items()}
    name, module = load_model(model)
    term_limit = max(1, int(memory_limit) // TERM_BYTES)
    instance = _Instance(module, name, A, rank, one_hot, extra, term_limit)  # type: ignore[arg-type]
    lowered: Lowered | None = None
    estimate: tuple[int, int] | None = None
    # the package's own module, as imported (a script may name itself anything)
    built_in = module.__name__.startswith("bmfdsl.models.") and (
        sys.modules.get(module.__name__) is module
    )
    if A.shape[0] * A.shape[1] * rank <= (BUILT_IN_EAGER_CELLS if built_in else EAGER_CELLS):
        lowered = _lower_and_check(instance.declare(), name, "this instance")
        metadata, check = lowered.declaration, "instance"
    else:
        metadata, estimate = _probe_sub_instances(instance)
        check = "sub-instances"
    structure = _claimed_structure(instance, metadata, on_instance=lowered is not None)
    return CompiledModel(
        model_name=name,
        A=_read_only(A),  # the structure keeps the writable copy: numba's kernels take it
        rank=rank,
        one_hot=one_hot,  # type: ignore[arg-type]
        data={key: _read_only(value) for key, value in extra.items()},
        metadata=metadata,
        declare=instance.declare,
        structure=structure,
        structure_check=check if structure is not None else None,
        size_estimate=estimate,
        memory_limit=int(memory_limit),
        lowered=lowered,
    )


def _lower_and_check(declaration: Declaration, name: str, where: str) -> Lowered:
    """The declaration lowered, its structure claim (if any) verified on it."""
    lowered = Lowered(declaration)
    if declaration.claim is not None:
        verify_claim(lowered, name, where)
    return lowered


def _probe_sub_instances(instance: _Instance) -> tuple[Declaration, tuple[int, int]]:
    """Declare the model on ``_PROBES`` random sub-instances and check its claim on each.

    Returns the first sub-instance's declaration (its weights, groups and claim stand for the
    instance's) and the instance's ``(terms, variables)`` extrapolated from it.
    """
    (m, n), rank = instance.A.shape, instance.rank
    rng = np.random.default_rng(0)
    first: Declaration | None = None
    for _ in range(_PROBES):
        rows = np.sort(rng.choice(m, min(m, max(_PROBE_SIZE, rank)), replace=False))
        cols = np.sort(rng.choice(n, min(n, max(_PROBE_SIZE, rank)), replace=False))
        probe = instance.restricted(rows, cols).declare()
        if probe.claim is not None:
            verify_claim(Lowered(probe), instance.name, "a sub-instance")
        first = first or probe
    assert first is not None
    # terms and variables grow with the cells of A: extrapolate from the sub-instance
    scale = (m * n) / float(first.A.shape[0] * first.A.shape[1])
    return first, (int(first.space.held_terms * scale), int(first.space.size * scale))


def _claimed_structure(
    instance: _Instance, metadata: Declaration, *, on_instance: bool
) -> BMFStructure | None:
    """The verified claim as a :class:`BMFStructure` of the whole instance, if any."""
    if metadata.claim is None:
        return None
    mask, entry_weights = _full_claim_arrays(metadata, instance.data, instance.A.shape, on_instance)
    return claimed_structure(
        metadata,
        A=instance.A,
        rank=instance.rank,
        one_hot=instance.one_hot,
        mask=mask,
        entry_weights=entry_weights,
    )


def _full_claim_arrays(
    metadata: Declaration, data: Mapping[str, Any], shape: tuple[int, int], on_instance: bool
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The claim's mask and entry weights on the whole instance; off the instance (built on
    sub-instances only) checked here as the model's ``declare_bmf`` checks them."""
    claim = metadata.claim
    assert claim is not None
    if on_instance:
        return claim.mask, claim.entry_weights
    arrays: list[np.ndarray | None] = []
    sources = (claim.mask_source, claim.entry_weights_source)
    names = ("mask", "entry_weights")
    for source, value, name in zip(sources, (claim.mask, claim.entry_weights), names, strict=True):
        if value is None:
            arrays.append(None)
        elif source is not None and source in data:
            arrays.append(check_entry_array(data[source], shape, name, binary=name == "mask"))
        else:
            raise ModelDefinitionError(
                "on a large instance a structure claim's mask/entry_weights must come from "
                "compile_model(data=...): pass model.data[name] to model.declare_bmf"
            )
    return arrays[0], arrays[1]

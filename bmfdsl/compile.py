"""Compile a model (registered name or user script) for one data matrix and rank."""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from bmfdsl.compiled import CompiledModel, PyquboSource, QuboSource, VectorSource
from bmfdsl.dsl import ModelBuilder
from bmfdsl.errors import InvalidParameterError, ModelDefinitionError, UnknownNameError
from bmfdsl.fastpath import FAST_BUILDERS
from bmfdsl.structure import BMFStructure
from bmfdsl.validation import check_binary_matrix, check_one_hot, check_rank

__all__ = ["ModelInfo", "compile_model", "list_models", "load_model"]

_REGISTERED: dict[str, str] = {
    "formulation1": "bmfdsl.models.formulation1",
    "formulation2": "bmfdsl.models.formulation2",
    "formulation2-reduced": "bmfdsl.models.formulation2_reduced",
}


@dataclass(frozen=True)
class ModelInfo:
    """A registered model: its name, module and one-line description."""

    name: str
    module: str
    description: str
    fast_path: bool


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def list_models() -> list[ModelInfo]:
    """The registered models.

    >>> [info.name for info in list_models()]
    ['formulation1', 'formulation2', 'formulation2-reduced']
    """
    infos = []
    for name, module_name in _REGISTERED.items():
        module = importlib.import_module(module_name)
        infos.append(
            ModelInfo(name, module_name, getattr(module, "DESCRIPTION", ""), name in FAST_BUILDERS)
        )
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
    except Exception as exc:  # a user's script can fail in any way; report it as malformed
        raise ModelDefinitionError(
            f"model script {str(path)!r} failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def load_model(model: str | os.PathLike[str] | ModuleType) -> tuple[str, ModuleType]:
    """Resolve a registered name, a script path or a module to ``(name, module)``.

    Raises:
        UnknownNameError: a name that is neither registered nor an existing ``.py`` file.
        ModelDefinitionError: the script fails to load or has no callable ``build``.
    """
    if isinstance(model, ModuleType):
        name, module = getattr(model, "NAME", model.__name__), model
    else:
        text = os.fspath(model)
        key = _normalise(text)
        if key in _REGISTERED:
            name, module = key, importlib.import_module(_REGISTERED[key])
        elif text.endswith(".py") or os.path.sep in text or Path(text).is_file():
            name, module = text, _load_script(Path(text))
        else:
            raise UnknownNameError(
                "model", text, _REGISTERED, hint="or pass the path of a model script (.py)"
            )
    if not callable(getattr(module, "build", None)):
        raise ModelDefinitionError(
            f"model {name!r} has no function build(model); a model script must define "
            "`def build(model): ...` (see models/formulation1.py)"
        )
    return str(name), module


def _declare(module: ModuleType, name: str, A: np.ndarray, rank: int, one_hot: Any) -> ModelBuilder:
    builder = ModelBuilder(A, rank, one_hot)
    try:
        result = module.build(builder)
    except ModelDefinitionError:
        raise
    except Exception as exc:
        raise ModelDefinitionError(
            f"build(model) of model {name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if result is not None:
        raise ModelDefinitionError(
            f"build(model) of model {name!r} must declare on `model` and return None; "
            f"it returned {type(result).__name__}"
        )
    builder.check_complete(f"model {name!r}")
    return builder


_PROBES: dict[tuple[str, int, int, str | None], ModelBuilder] = {}


def _probe(module: ModuleType, name: str, rank: int, one_hot: Any) -> ModelBuilder:
    """The declaration of a ``rank x rank`` instance: the model's weights, groups and flags.

    The fast path takes its metadata from here, so it can never drift from the script.
    """
    key = (name, id(module), rank, one_hot)
    if key not in _PROBES:
        _PROBES[key] = _declare(module, name, np.ones((rank, rank), dtype=np.int8), rank, one_hot)
    return _PROBES[key]


def compile_model(
    model: str | os.PathLike[str] | ModuleType,
    A: Any,
    rank: int,
    *,
    one_hot: str | None = None,
    fast: bool | None = None,
) -> CompiledModel:
    """Compile ``model`` for data ``A`` and target rank ``rank``, once.

    Args:
        model: a registered name (see :func:`list_models`), the path of a model script that
            defines ``build(model)``, or such a module.
        A: the 0/1 data matrix (m x n).
        rank: the target rank, ``1 <= rank <= min(m, n)``.
        one_hot: ``"V"`` (every column of A in exactly one cluster), ``"U"``, or ``None``.
        fast: use the numpy fast path (registered models only). ``None``: when available.
            ``False`` forces PyQUBO, the declarative source of truth.

    Returns:
        A :class:`~bmfdsl.compiled.CompiledModel`; ``to_bqm(**weights)`` re-weights it
        without recompiling.

    >>> import numpy as np
    >>> compiled = compile_model("formulation1", np.ones((3, 2)), 2, one_hot="V")
    >>> compiled.weight_names, compiled.num_variables
    (('lam', 'lam_onehot'), 22)
    """
    A = check_binary_matrix(A)
    rank = check_rank(rank, A.shape)
    one_hot = check_one_hot(one_hot)
    name, module = load_model(model)
    use_fast = name in FAST_BUILDERS if fast is None else bool(fast)
    if use_fast and name not in FAST_BUILDERS:
        raise InvalidParameterError(
            f"model {name!r} has no fast path; fast paths exist for {sorted(FAST_BUILDERS)}"
        )
    if use_fast:
        metadata = _probe(module, name, rank, one_hot)
        build = FAST_BUILDERS[name]
        source: QuboSource = VectorSource(
            lambda: build(A, rank, one_hot)  # type: ignore[arg-type]
        )
    else:
        metadata = _declare(module, name, A, rank, one_hot)
        source = PyquboSource(metadata)
    structure = BMFStructure(A, rank, one_hot) if metadata.is_plain_bmf else None  # type: ignore[arg-type]
    return CompiledModel(
        model_name=name,
        A=A,
        rank=rank,
        one_hot=one_hot,  # type: ignore[arg-type]
        weights=metadata.weights,
        group_weights={g.name: g.weight for g in metadata.groups.values()},
        structure=structure,
        source=source,
    )

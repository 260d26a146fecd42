"""The bmfdsl error tree.

Every error raised on purpose by bmfdsl subclasses :class:`BmfdslError` *and* the
builtin exception a caller would expect (``ValueError``, ``KeyError``, ``ImportError``,
...), so ``except ValueError`` keeps working while ``except BmfdslError`` catches
everything of ours. Messages say what went wrong and how to fix it. Warnings go through
:func:`warn_caller`, which names the user's line however deep in the package they arise.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable

__all__ = [
    "BackendUnavailableError",
    "BmfdslError",
    "InvalidCredentialsError",
    "InvalidMatrixError",
    "InvalidParameterError",
    "MissingCredentialsError",
    "ModelDefinitionError",
    "ModelTooLargeError",
    "NotFittedError",
    "PerformanceWarning",
    "SolverError",
    "UnknownNameError",
    "warn_caller",
]


class BmfdslError(Exception):
    """Base class of every error bmfdsl raises on purpose."""


class InvalidMatrixError(BmfdslError, ValueError):
    """The data matrix is not a non-empty 2-D 0/1 array."""


class InvalidParameterError(BmfdslError, ValueError):
    """A parameter (rank, weight, option) has a value out of range or of the wrong kind."""


class UnknownNameError(BmfdslError, KeyError, ValueError):
    """A name (model, backend, weight, parameter) is not known; the message lists the valid ones."""

    def __init__(self, kind: str, name: object, known: Iterable[str], hint: str = "") -> None:
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        self.hint = hint
        listed = ", ".join(repr(k) for k in self.known) or "(none)"
        message = f"unknown {kind} {name!r}; known {kind}s: {listed}"
        if hint:
            message += f". {hint}"
        super().__init__(message)

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0])


class ModelDefinitionError(BmfdslError, TypeError):
    """A user's model script is malformed (missing ``build``, wrong return type, ...)."""


class ModelTooLargeError(BmfdslError, MemoryError):
    """Building a model would exceed the size limit; says how big and what to do instead."""


class BackendUnavailableError(BmfdslError, ImportError):
    """A backend needs an optional dependency that is not installed; names the extra."""


class MissingCredentialsError(BmfdslError, RuntimeError):
    """A cloud backend needs a credential; the message names the environment variable."""


class InvalidCredentialsError(BmfdslError, ValueError):
    """A credential is malformed (control characters, ...); names the variable, never the value."""


class NotFittedError(BmfdslError, AttributeError, ValueError):
    """An estimator was used before ``fit`` (like scikit-learn's NotFittedError)."""


class SolverError(BmfdslError, RuntimeError):
    """A solver or remote service failed while solving."""


class PerformanceWarning(UserWarning):
    """A call will be slow or use much memory (a dask array loaded whole); the message says
    how slow and what to do instead."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the first caller outside bmfdsl,
    however deep in the package it is raised and by whichever public entry (``factorize``, an
    estimator's ``fit``, the registry, a model compile): the warning names the user's line,
    and filters by module see the user's module. scikit-learn's frames are passed over too:
    its output wrappers sit between an estimator's ``fit`` and its ``fit_transform``.

    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_caller("careful", UserWarning)
    >>> caught[0].filename.startswith("<doctest")
    True
    """
    skipped = [_PACKAGE_DIR]
    sklearn_file = getattr(sys.modules.get("sklearn"), "__file__", None)
    if isinstance(sklearn_file, str):
        skipped.append(os.path.dirname(os.path.abspath(sklearn_file)) + os.sep)
    prefixes = tuple(skipped)
    frame = sys._getframe(1)
    level = 2  # stacklevel 2: warn_caller's caller
    while frame.f_back is not None and frame.f_code.co_filename.startswith(prefixes):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)

"""Results files that survive damage: validated records, atomic writes, a lock per folder.

* :func:`read_records` reads a JSONL results file line by line and keeps only well-formed
  records; every other line (bad UTF-8, not JSON, missing or wrong-typed fields) is
  reported by line number, so a report can name it and a resumed run redoes it.
* ``write_text_atomic`` (its one home is ``bmfdsl.apps._io``, also used by
  ``factorize --out``) writes through a temporary file in the same folder and a rename: a
  crash leaves the old file or the new one, never half of one, and a symlink at the path
  is replaced rather than followed. :func:`append_line` refuses symlinks too.
* :func:`lock_out_dir` holds an exclusive lock on a results folder for one runner. The lock
  is an ``flock`` on ``OUT/.bmfdsl.lock``: the kernel drops it when its process dies, so a
  killed runner never leaves a stale lock behind; the file names the holder's pid.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bmfdsl.errors import BmfdslError

LOCK_NAME = ".bmfdsl.lock"


class OutDirLockedError(BmfdslError, RuntimeError):
    """Another runner is writing to the same results folder."""


class ResultsPathError(BmfdslError, OSError):
    """A results file cannot be written safely (a symlink in its place, ...)."""


@dataclass
class RecordsFile:
    """The readable records of a JSONL file and a description of each skipped line."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: run ids of the damaged lines that name one (a line cut short names none)
    skipped_runs: list[str] = field(default_factory=list)

    def skipped_summary(self, path: str | os.PathLike[str]) -> str:
        """One line naming the skipped lines (``""`` when none were skipped).

        A damaged line whose run has a good record (it was redone by a resumed call) is
        said to be redone; the others are redone by re-running the experiment.
        """
        if not self.skipped:
            return ""
        shown = "; ".join(self.skipped[:5]) + ("; ..." if len(self.skipped) > 5 else "")
        good = {record["run_id"] for record in self.records if record["status"] == "ok"}
        redone = sum(run_id in good for run_id in self.skipped_runs)
        unnamed = len(self.skipped) - len(self.skipped_runs)
        if redone == len(self.skipped):
            outcome = "each of their runs has been redone since"
        elif redone or unnamed:
            outcome = (
                f"{redone} of their runs redone since; re-running the experiment redoes any "
                "run still without a record"
            )
        else:
            outcome = "re-running the experiment redoes them"
        return f"{path}: skipped {len(self.skipped)} damaged record(s) ({shown}); {outcome}"

    def conflicts(self) -> list[str]:
        """Run ids with two successful records that disagree on the result (the last counts).

        Runs are deterministic, so two answers for one run id mean two program versions or
        hand-edited files wrote to one results file.

        >>> ok = {"status": "ok", "table": 1, "group": "g", "method": "m", "rank": 1}
        >>> records = [{**ok, "run_id": "a", "error": 1, "relative_error": 0.1},
        ...            {**ok, "run_id": "a", "error": 2, "relative_error": 0.2}]
        >>> RecordsFile(records).conflicts()
        ['a']
        """
        seen: dict[str, tuple[Any, ...]] = {}
        conflicting: dict[str, None] = {}
        for record in self.records:
            if record["status"] != "ok":
                continue
            result = tuple(record.get(name) for name in _RESULT_FIELDS)
            earlier = seen.setdefault(record["run_id"], result)
            if earlier != result:
                conflicting[record["run_id"]] = None
        return list(conflicting)

    def conflicts_summary(self, path: str | os.PathLike[str]) -> str:
        """One line naming the conflicting run ids (``""`` when there are none)."""
        runs = self.conflicts()
        if not runs:
            return ""
        shown = ", ".join(repr(run[:80]) for run in runs[:5]) + (", ..." if len(runs) > 5 else "")
        return (
            f"{path}: {len(runs)} run(s) have successful records that disagree ({shown}); "
            "the last record of each counts. Runs are deterministic: results of different "
            "versions or settings were mixed; move one of them to another folder"
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# The fields the report and resume read, and what each must be.
_COMMON: dict[str, Any] = {"run_id": str, "status": str}
_OK: dict[str, Any] = {
    "table": _is_int,
    "group": str,
    "method": str,
    "rank": _is_int,
    "error": _is_int,
    "relative_error": _is_number,
}
_OPTIONAL_OK: dict[str, Any] = {"time": _is_number}
# What two records of one run must agree on (timings differ from call to call).
_RESULT_FIELDS = ("error", "relative_error", "lower_bound")


def _matches(value: Any, kind: Any) -> bool:
    return isinstance(value, kind) if isinstance(kind, type) else bool(kind(value))


def check_record(record: Any) -> str:
    """Why ``record`` cannot be used (``""`` when it can).

    >>> check_record({"run_id": "x", "status": "ok"})
    "missing field 'table'"
    >>> check_record({"run_id": "x", "status": "failed", "message": "boom"})
    ''
    """
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    required = dict(_COMMON)
    if record.get("status") == "ok":
        required.update(_OK)
    for name, kind in required.items():
        if name not in record:
            return f"missing field {name!r}"
        if not _matches(record[name], kind):
            return f"field {name!r} has the wrong type ({type(record[name]).__name__})"
    if record["status"] not in ("ok", "failed"):
        return f"unknown status {record['status'][:20]!r}"
    if record["status"] == "ok":
        for name, kind in _OPTIONAL_OK.items():
            if name in record and not _matches(record[name], kind):
                return f"field {name!r} has the wrong type ({type(record[name]).__name__})"
        ari = record.get("ari")
        if ari is not None and not (
            isinstance(ari, dict) and all(_is_number(v) for v in ari.values())
        ):
            return "field 'ari' is not an object of numbers"
    return ""


def read_records(path: str | os.PathLike[str]) -> RecordsFile:
    """The valid records of a JSONL file; other lines are described in ``skipped``.

    A missing file reads as empty.
    """
    result = RecordsFile()
    path = Path(path)
    if not path.exists():
        return result
    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                result.skipped.append(f"line {number}: not UTF-8")
                continue
            except (ValueError, RecursionError):
                result.skipped.append(f"line {number}: not JSON")
                continue
            problem = check_record(record)
            if problem:
                run_id = record.get("run_id") if isinstance(record, dict) else None
                named = f" ({run_id[:80]!r})" if isinstance(run_id, str) else ""
                result.skipped.append(f"line {number}{named}: {problem}")
                if isinstance(run_id, str):
                    result.skipped_runs.append(run_id)
                continue
            result.records.append(record)
    return result


def read_json_object(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """A JSON object from ``path``; ``None`` when missing, empty, unreadable or not an object."""
    try:
        value = json.loads(Path(path).read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def append_line(path: str | os.PathLike[str], line: bytes) -> None:
    """Append ``line`` (ending in ``\\n``) to ``path`` and push it to disk; no symlinks.

    A previous line left without its newline by a crash is ended first.
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags, 0o644)
    except OSError as exc:
        if Path(path).is_symlink():
            raise ResultsPathError(
                f"{path} is a symlink; results are not written through links. Remove it or "
                "choose another --out folder"
            ) from exc
        raise
    with os.fdopen(descriptor, "r+b") as stream:
        size = stream.seek(0, os.SEEK_END)
        if size > 0:
            stream.seek(size - 1)
            if stream.read(1) != b"\n":
                stream.write(b"\n")
        stream.write(line)
        stream.flush()
        os.fsync(stream.fileno())


@contextlib.contextmanager
def lock_out_dir(out_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the results folder's lock for the ``with`` block.

    Raises:
        OutDirLockedError: another live process holds it; the message names its pid.
    """
    try:
        import fcntl
    except ImportError:  # no flock on this platform: run unlocked
        yield
        return
    path = Path(out_dir) / LOCK_NAME
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        raise ResultsPathError(
            f"cannot create the lock file {path} ({exc.strerror}); the results folder must be "
            "writable and the lock file must not be a symlink"
        ) from exc
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(descriptor)
            raise OutDirLockedError(
                f"{out_dir} is in use by another bmfdsl experiment ({holder}); wait for it to "
                "finish or use another --out folder. The lock ends with its process, so it is "
                "never stale"
            ) from None
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, _describe_self().encode(), 0)
        yield
    finally:
        os.close(descriptor)  # releases the flock


def _describe_self() -> str:
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname()})


def _holder(descriptor: int) -> str:
    try:
        info: Mapping[str, Any] = json.loads(os.pread(descriptor, 4096, 0).decode("utf-8"))
        return f"pid {int(info['pid'])} on {str(info.get('host', '?'))[:100]}"
    except (OSError, ValueError, KeyError, TypeError):
        return "pid unknown"

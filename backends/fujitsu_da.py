"""``fujitsu-da``: the Fujitsu Digital Annealer v4 asynchronous REST API (on urllib3).

One ``sample`` call posts the QUBO to ``{url}/v4/async/qubo/solve``, polls
``{url}/v4/async/jobs/result/{job_id}`` until the job is ``Done`` (or ``Error`` /
``Canceled``), reads ``qubo_solution.solutions[*].configuration`` and deletes the job.
Energies are recomputed locally from the model.

Configuration: the base URL from the ``url`` option or ``BMFDSL_DA_URL``; the API key from
``api_key`` or ``BMFDSL_DA_API_KEY`` (sent as ``X-Api-Key``, never shown in reprs, messages
or records; surrounding whitespace is stripped and control characters are refused). The URL
must be ``https://`` (plain ``http://`` only to this machine, or with ``allow_http=True``);
credentials in it are redacted wherever it is shown. Construction contacts nothing.

Under faults every failure is one :class:`DAServiceError` (or a subclass): resets, truncated
or oversized bodies (``max_response_bytes``), bad JSON, invalid job ids and solutions.
Idempotent calls (polling ``GET``, ``DELETE``) are retried on resets, timeouts and HTTP
429/500/502/503/504 with capped exponential backoff that honours ``Retry-After``; the
solve ``POST`` is never repeated (it would start a second paid job). One deadline bounds the
whole solve: ``time_limit`` (rounded up) + ``job_timeout``; every request, retry wait and
byte read fits inside it (clean-up after it gets at most ``min(request_timeout, 10)`` s
more). Redirects are followed only within the same origin. A finished result is returned
even when deleting the job fails afterwards (a :class:`DACleanupWarning`). The HTTP
machinery, on urllib3 (``pip install 'bmfdsl[fujitsu]'``), is :mod:`bmfdsl.backends._http`.

One-hot constraints can be passed natively: ``one_hot_groups=[[label, ...], ...]`` sends
them as ``one_way_one_hot_groups`` (those variables are indexed first, group by group)
instead of as penalty terms, which the model should then leave out.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import warnings
from collections.abc import Hashable, Sequence
from typing import Any, ClassVar

import dimod
import numpy as np

from bmfdsl.backends._common import BackendSampler, Initialized, check_num_reads, given_options
from bmfdsl.backends._http import HTTPCallError, Limits, call_json
from bmfdsl.credentials import check_service_url, clean_credential, redact_url, service_text
from bmfdsl.errors import InvalidParameterError, MissingCredentialsError, SolverError

__all__ = [
    "API_KEY_VARIABLE",
    "URL_VARIABLE",
    "DAAuthenticationError",
    "DACleanupWarning",
    "DAJobError",
    "DARateLimitError",
    "DARequestError",
    "DAServiceError",
    "DATimeoutError",
    "FujitsuDABackend",
    "build_request_body",
]

API_KEY_VARIABLE = "BMFDSL_DA_API_KEY"
URL_VARIABLE = "BMFDSL_DA_URL"
DEFAULT_URL = "https://api.aispf.global.fujitsu.com/da"

_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
_INDEX = re.compile(r"0|[1-9][0-9]*")


class DAServiceError(SolverError):
    """The Digital Annealer service failed or answered something unreadable.

    Attributes:
        status: the HTTP status, if the service answered one.
        retry_after: seconds the service asked to wait (``Retry-After``), if it did.
    """

    def __init__(
        self, message: str, status: int | None = None, *, retry_after: float | None = None
    ) -> None:
        # a server may echo the key back, or send escapes and line breaks to forge output
        super().__init__(service_text(message))
        self.status = status
        self.retry_after = retry_after


class DAAuthenticationError(DAServiceError):
    """HTTP 401/403: the API key was rejected."""


class DARateLimitError(DAServiceError):
    """HTTP 429: too many jobs are queued; retry later."""


class DARequestError(DAServiceError):
    """HTTP 400: the request was refused (bad parameters, size or quota)."""


class DAJobError(DAServiceError):
    """The job ended with status ``Error`` or ``Canceled``."""


class DATimeoutError(DAServiceError, TimeoutError):
    """A request or the whole job took longer than allowed."""


class DACleanupWarning(UserWarning):
    """Cancelling or deleting a job failed; the solve's own outcome stands."""


# Passed to the service as given; the service's own defaults stand for the others.
_SOLVER_OPTIONS = {
    "num_run": "parallel annealing runs, 1..1024",
    "num_group": "groups of runs with different settings, 1..16",
    "gs_level": "global-search level, 0..100",
    "gs_cutoff": "global-search cutoff, iterations",
    "one_hot_level": "one-hot search level (with one_hot_groups)",
    "one_hot_cutoff": "one-hot search cutoff (with one_hot_groups)",
    "target_energy": "stop once this energy is reached",
}


def _variable_order(
    bqm: dimod.BinaryQuadraticModel, one_hot_groups: Sequence[Sequence[Hashable]] | None
) -> tuple[list[Hashable], list[int]]:
    """Variables in index order (one-hot groups first) and the group sizes."""
    if not one_hot_groups:
        return list(bqm.variables), []
    seen: set[Hashable] = set()
    order: list[Hashable] = []
    for group in one_hot_groups:
        if len(group) == 0:
            raise InvalidParameterError("one_hot_groups must not contain an empty group")
        for label in group:
            if label not in bqm.variables:
                raise InvalidParameterError(
                    f"one_hot_groups names {label!r}, which is not a variable of the model"
                )
            if label in seen:
                raise InvalidParameterError(
                    f"one_hot_groups must be disjoint; {label!r} is in two groups"
                )
            seen.add(label)
            order.append(label)
    order.extend(v for v in bqm.variables if v not in seen)
    return order, [len(group) for group in one_hot_groups]


def build_request_body(
    bqm: dimod.BinaryQuadraticModel,
    *,
    order: Sequence[Hashable],
    solver_options: dict[str, Any],
    group_sizes: Sequence[int] = (),
) -> dict[str, Any]:
    """The JSON body of ``POST /v4/async/qubo/solve`` for a BINARY ``bqm``.

    Variable ``order[i]`` becomes index ``i``; the offset is a term with ``"p": []``.

    >>> bqm = dimod.BinaryQuadraticModel({"x": 1.0, "y": -2.0}, {("x", "y"): 3.0}, 0.5, "BINARY")
    >>> body = build_request_body(bqm, order=["x", "y"], solver_options={"time_limit_sec": 1})
    >>> body["binary_polynomial"]["terms"]
    [{'c': 1.0, 'p': [0]}, {'c': -2.0, 'p': [1]}, {'c': 3.0, 'p': [0, 1]}, {'c': 0.5, 'p': []}]
    """
    index = {label: i for i, label in enumerate(order)}
    terms: list[dict[str, Any]] = []
    for label, bias in bqm.iter_linear():
        if bias:
            terms.append({"c": float(bias), "p": [index[label]]})
    for u, v, bias in bqm.iter_quadratic():
        if bias:
            terms.append({"c": float(bias), "p": sorted((index[u], index[v]))})
    if bqm.offset:
        terms.append({"c": float(bqm.offset), "p": []})
    options = dict(solver_options)
    if group_sizes:
        options["one_way_one_hot_groups"] = {"numbers": [int(size) for size in group_sizes]}
    return {"fujitsuDA3": options, "binary_polynomial": {"terms": terms}}


class FujitsuDABackend(BackendSampler, Initialized):
    """Fujitsu Digital Annealer (v4 asynchronous API) as a dimod sampler.

    Args:
        url: base URL of the service (default: ``BMFDSL_DA_URL`` or Fujitsu's endpoint).
        api_key: API key (default: ``BMFDSL_DA_API_KEY``); a missing key raises
            :class:`~bmfdsl.errors.MissingCredentialsError`, a malformed one
            :class:`~bmfdsl.errors.InvalidCredentialsError`.
        poll_interval: seconds between result polls.
        request_timeout: seconds allowed for one HTTP request.
        job_timeout: seconds to wait for a job beyond its ``time_limit`` before cancelling;
            ``time_limit + job_timeout`` bounds the whole solve.
        max_retries: retries of one idempotent request (``GET``, ``DELETE``).
        backoff: first retry wait in seconds, doubled on each retry up to ``max_backoff``.
        max_backoff: longest wait between retries, also for a larger ``Retry-After``.
        max_response_bytes: largest answer read; a larger one is an error.
        allow_http: accept plain ``http://`` to a remote host (trusted test rigs only).

    >>> FujitsuDABackend(url="http://127.0.0.1:1", api_key="secret")
    FujitsuDABackend(url='http://127.0.0.1:1')
    """

    name: ClassVar[str] = "fujitsu-da"
    descriptions: ClassVar[dict[str, str]] = {
        "time_limit": "seconds of annealing, rounded up to an integer in 1..3600",
        "num_reads": "solutions returned (num_output_solution), 1..1024",
        "initial_states": "one warm start, sent as guidance_config",
        "one_hot_groups": "list of label lists sent as one_way_one_hot_groups",
        **_SOLVER_OPTIONS,
    }

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        poll_interval: float = 1.0,
        request_timeout: float = 60.0,
        job_timeout: float = 120.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_response_bytes: int = 256 * 2**20,
        allow_http: bool = False,
    ) -> None:
        url_source = "url" if url is not None else URL_VARIABLE
        raw_url = url if url is not None else os.environ.get(URL_VARIABLE) or DEFAULT_URL
        self._base = check_service_url(raw_url, variable=url_source, allow_http=allow_http)
        key_source = "api_key" if api_key is not None else API_KEY_VARIABLE
        key = api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE)
        if key is None or (isinstance(key, str) and not key.strip()):
            raise MissingCredentialsError(
                f"no Digital Annealer API key: set the {API_KEY_VARIABLE} environment variable "
                "or pass api_key=... to get_backend('fujitsu-da', ...)"
            )
        self._api_key = clean_credential(key, key_source)
        for option, value in (
            ("poll_interval", poll_interval),
            ("request_timeout", request_timeout),
            ("job_timeout", job_timeout),
            ("backoff", backoff),
            ("max_backoff", max_backoff),
        ):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 < value < math.inf
            ):
                raise InvalidParameterError(f"{option} must be positive seconds; got {value!r}")
        for option, count, lowest in (
            ("max_retries", max_retries, 0),
            ("max_response_bytes", max_response_bytes, 1),
        ):
            if isinstance(count, bool) or not isinstance(count, int) or count < lowest:
                raise InvalidParameterError(
                    f"{option} must be an integer >= {lowest}; got {count!r}"
                )
        self.poll_interval = float(poll_interval)
        self.request_timeout = float(request_timeout)
        self.job_timeout = float(job_timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_response_bytes = max_response_bytes
        self._limits = Limits(
            self.request_timeout, max_retries, self.backoff, self.max_backoff, max_response_bytes
        )

    @property
    def url(self) -> str:
        """The service's base URL, any ``user:password@`` redacted."""
        return redact_url(self._base)

    def __repr__(self) -> str:  # never shows the API key
        return f"FujitsuDABackend(url={self.url!r})"

    @property
    def properties(self) -> dict[str, Any]:
        """Adds the service URL and the API version."""
        return {**super().properties, "url": self.url, "api": "v4 async"}

    # --- HTTP -------------------------------------------------------------------------

    def _request(
        self, method: str, path: str, body: Any = None, *, deadline: float, retry: bool = False
    ) -> Any:
        """One API call within ``deadline``; ``retry`` repeats it on transient failures."""
        data = None if body is None else _encode_body(body)
        headers = {
            "X-Api-Key": self._api_key,
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        try:
            return call_json(
                method,
                self._base + path,
                data,
                headers,
                deadline=deadline,
                limits=self._limits,
                retry=retry,
            )
        except HTTPCallError as failure:
            raise self._error(f"{method} {path}", failure) from None

    def _error(self, where: str, failure: HTTPCallError) -> DAServiceError:
        """The adapter's typed error for a failed call."""
        if failure.kind == "status":
            return _http_error(where, failure)
        if failure.kind == "deadline":
            return DATimeoutError(
                f"{where}: the solve's deadline (time_limit + job_timeout) passed; raise "
                "job_timeout or lower time_limit"
            )
        if failure.kind == "timeout":
            return DATimeoutError(f"{where} {failure.reason}")
        if failure.kind == "redirect":
            return DAServiceError(
                f"{where} was {failure.reason}. If that is the service's new address, set "
                f"{URL_VARIABLE} to it",
                failure.status,
            )
        if failure.kind == "answer":
            return DAServiceError(f"{where} {failure.reason}")
        return DAServiceError(f"{where}: {failure.reason} (Digital Annealer at {self.url})")

    # --- sampling ---------------------------------------------------------------------

    def _sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        time_limit: float = 10,
        num_reads: int = 5,
        initial_states: Any = None,
        one_hot_groups: Sequence[Sequence[Hashable]] | None = None,
        num_run: int | None = None,
        num_group: int | None = None,
        gs_level: int | None = None,
        gs_cutoff: int | None = None,
        one_hot_level: int | None = None,
        one_hot_cutoff: int | None = None,
        target_energy: float | None = None,
    ) -> dimod.SampleSet:
        binary = (
            bqm if bqm.vartype is dimod.BINARY else bqm.change_vartype(dimod.BINARY, inplace=False)
        )
        order, group_sizes = _variable_order(binary, one_hot_groups)
        time_limit_sec = _time_limit_sec(time_limit)
        num_output_solution = check_num_reads(num_reads)
        if num_output_solution > 1024:
            raise InvalidParameterError(
                "the Digital Annealer returns at most 1024 solutions; "
                f"got num_reads={num_output_solution}"
            )
        options: dict[str, Any] = {
            "time_limit_sec": time_limit_sec,
            "num_output_solution": num_output_solution,
        }
        if initial_states is not None:
            options["guidance_config"] = self._guidance(binary, order, initial_states)
        options.update(
            given_options(
                num_run=num_run,
                num_group=num_group,
                gs_level=gs_level,
                gs_cutoff=gs_cutoff,
                one_hot_level=one_hot_level,
                one_hot_cutoff=one_hot_cutoff,
                target_energy=target_energy,
            )
        )
        body = build_request_body(
            binary, order=order, solver_options=options, group_sizes=group_sizes
        )
        deadline = time.monotonic() + time_limit_sec + self.job_timeout
        submitted = self._request("POST", "/v4/async/qubo/solve", body, deadline=deadline)
        job_id = submitted.get("job_id") if isinstance(submitted, dict) else None
        if isinstance(job_id, int) and not isinstance(job_id, bool):
            job_id = str(job_id)
        if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
            raise DAServiceError(
                f"the solve request returned no valid job_id: {str(submitted)[:200]}"
            )
        result = self._wait_for(job_id, deadline, time_limit_sec + self.job_timeout)
        sampleset = _sampleset_from_solution(result, bqm, order)
        sampleset.info["job_id"] = job_id
        return sampleset

    def _guidance(
        self, binary: dimod.BinaryQuadraticModel, order: list[Hashable], initial_states: Any
    ) -> dict[str, bool]:
        """The one warm start as ``guidance_config``: index (in ``order``) -> value."""
        states = self.given_states(binary, initial_states)
        if len(states) != 1:
            raise InvalidParameterError(
                f"the Digital Annealer takes one warm start; got {len(states)} states"
            )
        by_label = dict(zip(binary.variables, states[0].tolist(), strict=True))
        return {str(i): bool(by_label[label]) for i, label in enumerate(order)}

    def _wait_for(self, job_id: str, deadline: float, limit: float) -> dict[str, Any]:
        path = f"/v4/async/jobs/result/{job_id}"
        finished = False
        try:
            while True:
                try:
                    answer = self._request("GET", path, deadline=deadline, retry=True)
                except DATimeoutError:
                    if time.monotonic() < deadline:
                        raise
                    break  # the overall deadline: cancel below
                status = answer.get("status") if isinstance(answer, dict) else None
                if status == "Done":
                    finished = True
                    return answer  # type: ignore[no-any-return]
                if status in ("Error", "Canceled"):
                    finished = True
                    detail = answer.get("message") or answer.get("qubo_solution") or ""
                    raise DAJobError(f"job {job_id} ended with status {status}: {detail!s:.200}")
                if status not in ("Waiting", "Running"):
                    finished = True
                    raise DAServiceError(f"job {job_id} has an unknown status {status!s:.50}")
                time.sleep(max(0.0, min(self.poll_interval, deadline - time.monotonic())))
            raise DATimeoutError(
                f"job {job_id} was not done after {limit:.0f} s; cancelled it. "
                "Raise job_timeout or lower time_limit."
            )
        finally:
            self._clean_up(job_id, cancel=not finished)

    def _clean_up(self, job_id: str, *, cancel: bool) -> None:
        # Best effort with its own short deadline: a failed clean-up must not hide the
        # solve's own outcome (a finished result or the error being raised).
        deadline = time.monotonic() + min(self.request_timeout, 10.0)
        step = "cancel"
        try:
            if cancel:
                self._request(
                    "POST", "/v4/async/jobs/cancel", {"job_id": job_id}, deadline=deadline
                )
            step = "delete"
            self._request(
                "DELETE", f"/v4/async/jobs/result/{job_id}", deadline=deadline, retry=True
            )
        except DAServiceError as exc:
            warnings.warn(
                f"could not {step} Digital Annealer job {job_id} ({exc}); it stays in the "
                "service's job list until it expires",
                DACleanupWarning,
                stacklevel=4,
            )


def _encode_body(body: Any) -> bytes:
    try:
        return json.dumps(body, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"the request cannot be sent as JSON ({exc}); solver options and coefficients "
            "must be finite numbers, strings, lists or dicts"
        ) from None


def _http_error(where: str, failure: HTTPCallError) -> DAServiceError:
    detail = failure.body.decode(errors="replace")
    status = failure.status
    where = f"{where} -> HTTP {status}"
    if status in (401, 403):
        return DAAuthenticationError(
            f"{where}: the API key was rejected; check {API_KEY_VARIABLE}", status
        )
    if status == 429:
        return DARateLimitError(
            f"{where}: too many jobs queued; wait for running jobs or retry later",
            status,
            retry_after=failure.retry_after,
        )
    if status == 400:
        return DARequestError(f"{where}: request refused (parameters or quota): {detail}", status)
    return DAServiceError(f"{where}: {detail}", status, retry_after=failure.retry_after)


def _time_limit_sec(time_limit: Any) -> int:
    if (
        isinstance(time_limit, bool)
        or not isinstance(time_limit, int | float)
        or not math.isfinite(time_limit)
        or not 1 <= math.ceil(time_limit) <= 3600
    ):
        raise InvalidParameterError(f"time_limit must be seconds in 1..3600; got {time_limit!r}")
    return math.ceil(time_limit)


def _solution_rows(answer: Any, size: int) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Samples, frequencies and info from a ``Done`` answer, validated strictly.

    Every solution must give every variable index ``0..size-1`` exactly once as a JSON
    boolean, with a positive integer frequency; anything else is refused rather than
    guessed.
    """

    def bad(reason: str) -> DAServiceError:
        return DAServiceError(f"unreadable solution from the Digital Annealer: {reason}")

    solution = answer.get("qubo_solution") if isinstance(answer, dict) else None
    if not isinstance(solution, dict):
        raise bad("no qubo_solution object")
    solutions = solution.get("solutions")
    if not isinstance(solutions, list):
        raise bad("qubo_solution.solutions is not a list")
    if not solutions:
        raise DAServiceError("the Digital Annealer returned no solutions")
    samples = np.zeros((len(solutions), size), dtype=np.int8)
    frequencies = np.ones(len(solutions), dtype=np.int64)
    energies = []
    for row, item in enumerate(solutions):
        configuration = item.get("configuration") if isinstance(item, dict) else None
        if not isinstance(configuration, dict):
            raise bad(f"solution {row} has no configuration object")
        if len(configuration) != size:
            raise bad(f"solution {row} assigns {len(configuration)} variables, not {size}")
        for key, value in configuration.items():
            # the length check first: int() of thousands of digits raises, and is slow
            if len(key) > len(str(size)) or not _INDEX.fullmatch(key) or int(key) >= size:
                raise bad(f"solution {row} has variable index {key[:20]!r} outside 0..{size - 1}")
            if not isinstance(value, bool):
                raise bad(f"solution {row} gives variable {key} the non-boolean {value!r:.20}")
            samples[row, int(key)] = value
        frequency = item.get("frequency", 1)
        if (
            isinstance(frequency, bool)
            or not isinstance(frequency, int)
            or not 1 <= frequency <= 2**62
        ):
            raise bad(f"solution {row} has frequency {frequency!r:.20}; expected a positive int")
        frequencies[row] = frequency
        energy = item.get("energy")
        if isinstance(energy, bool) or not isinstance(energy, int | float | None):
            raise bad(f"solution {row} has a non-numeric energy {energy!r:.20}")
        try:
            energies.append(math.nan if energy is None else float(energy))
        except OverflowError:  # an integer beyond any float
            raise bad(f"solution {row} has an energy out of range") from None
    timing = solution.get("timing", {})
    if not isinstance(timing, dict):
        raise bad("timing is not an object")
    info: dict[str, Any] = {"da_energies": energies}
    for name in ("solve_time", "total_elapsed_time"):
        if name in timing:
            try:
                info[f"{name}_s"] = float(timing[name]) / 1000.0
            except (TypeError, ValueError):
                raise bad(f"timing.{name} is not a number of milliseconds") from None
    return samples, frequencies, info


def _sampleset_from_solution(
    answer: Any,
    bqm: dimod.BinaryQuadraticModel,
    order: list[Hashable],
) -> dimod.SampleSet:
    samples, frequencies, info = _solution_rows(answer, len(order))
    if bqm.vartype is dimod.SPIN:
        samples = 2 * samples - 1
    # Energies come from the caller's model, in its own vartype.
    return dimod.SampleSet.from_samples_bqm(
        (samples, order), bqm, num_occurrences=frequencies, info=info
    )

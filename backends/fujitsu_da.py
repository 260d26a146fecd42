"""``fujitsu-da``: the Fujitsu Digital Annealer v4 asynchronous REST API (stdlib only).

One ``sample`` call posts the QUBO to ``{url}/v4/async/qubo/solve``, polls
``{url}/v4/async/jobs/result/{job_id}`` until the job is ``Done`` (or ``Error`` /
``Canceled``), reads ``qubo_solution.solutions[*].configuration`` and deletes the job.
Energies are recomputed locally from the model.

Configuration: the base URL from the ``url`` option or ``BMFDSL_DA_URL``; the API key from
``api_key`` or ``BMFDSL_DA_API_KEY`` (sent as ``X-Api-Key``, never shown in reprs or
messages). Construction contacts nothing.

One-hot constraints can be passed natively: ``one_hot_groups=[[label, ...], ...]`` sends
them as ``one_way_one_hot_groups`` (those variables are indexed first, group by group)
instead of as penalty terms, which the model should then leave out.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Hashable, Sequence
from typing import Any, ClassVar

import dimod
import numpy as np

from bmfdsl.backends._common import BackendSampler, check_num_reads, parse_initial_states
from bmfdsl.errors import InvalidParameterError, MissingCredentialsError, SolverError

__all__ = [
    "API_KEY_VARIABLE",
    "URL_VARIABLE",
    "DAAuthenticationError",
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


class DAServiceError(SolverError):
    """The Digital Annealer service failed or answered something unreadable."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


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


_SOLVER_OPTIONS = {
    "num_run": "parallel annealing runs, 1..1024 (service default 16)",
    "num_group": "groups of runs with different settings, 1..16 (default 1)",
    "gs_level": "global-search level, 0..100 (default 5)",
    "gs_cutoff": "global-search cutoff, iterations (default 8000)",
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


class FujitsuDABackend(BackendSampler):
    """Fujitsu Digital Annealer (v4 asynchronous API) as a dimod sampler.

    Args:
        url: base URL of the service (default: ``BMFDSL_DA_URL`` or Fujitsu's endpoint).
        api_key: API key (default: ``BMFDSL_DA_API_KEY``); a missing key raises
            :class:`~bmfdsl.errors.MissingCredentialsError`.
        poll_interval: seconds between result polls.
        request_timeout: seconds allowed for one HTTP request.
        job_timeout: seconds to wait for a job beyond its ``time_limit`` before cancelling.

    >>> FujitsuDABackend(url="http://127.0.0.1:1", api_key="secret")
    FujitsuDABackend(url='http://127.0.0.1:1')
    """

    name: ClassVar[str] = "fujitsu-da"
    accepted_parameters: ClassVar[dict[str, str]] = {
        "time_limit": "seconds of annealing, rounded up to an integer in 1..3600 (default 10)",
        "num_reads": "solutions returned (num_output_solution), 1..1024 (default 5)",
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
    ) -> None:
        self.url = (url or os.environ.get(URL_VARIABLE) or DEFAULT_URL).rstrip("/")
        key = api_key or os.environ.get(API_KEY_VARIABLE)
        if not key:
            raise MissingCredentialsError(
                f"no Digital Annealer API key: set the {API_KEY_VARIABLE} environment variable "
                "or pass api_key=... to get_backend('fujitsu-da', ...)"
            )
        self._api_key = key
        for option, value in (
            ("poll_interval", poll_interval),
            ("request_timeout", request_timeout),
            ("job_timeout", job_timeout),
        ):
            if not value > 0:
                raise InvalidParameterError(f"{option} must be positive seconds; got {value!r}")
        self.poll_interval = float(poll_interval)
        self.request_timeout = float(request_timeout)
        self.job_timeout = float(job_timeout)

    def __repr__(self) -> str:  # never shows the API key
        return f"FujitsuDABackend(url={self.url!r})"

    @property
    def properties(self) -> dict[str, Any]:
        """Adds the service URL and the API version."""
        return {**super().properties, "url": self.url, "api": "v4 async"}

    # --- HTTP -------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={
                "X-Api-Key": self._api_key,
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.request_timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise _http_error(method, path, exc) from None
        except TimeoutError as exc:
            raise DATimeoutError(
                f"{method} {path} took longer than request_timeout={self.request_timeout} s"
            ) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError | socket.timeout):
                raise DATimeoutError(
                    f"{method} {path} took longer than request_timeout={self.request_timeout} s"
                ) from exc
            raise DAServiceError(
                f"cannot reach the Digital Annealer at {self.url}: {exc.reason}"
            ) from exc
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise DAServiceError(f"{method} {path} answered malformed JSON: {raw[:200]!r}") from exc

    # --- sampling ---------------------------------------------------------------------

    def _sample(self, bqm: dimod.BinaryQuadraticModel, **params: Any) -> dimod.SampleSet:
        binary = (
            bqm if bqm.vartype is dimod.BINARY else bqm.change_vartype(dimod.BINARY, inplace=False)
        )
        order, group_sizes = _variable_order(binary, params.pop("one_hot_groups", None))
        time_limit_sec = _time_limit_sec(params.pop("time_limit", 10))
        num_output_solution = check_num_reads(params.pop("num_reads", 5))
        if num_output_solution > 1024:
            raise InvalidParameterError(
                "the Digital Annealer returns at most 1024 solutions; "
                f"got num_reads={num_output_solution}"
            )
        options: dict[str, Any] = {
            "time_limit_sec": time_limit_sec,
            "num_output_solution": num_output_solution,
        }
        initial_states = params.pop("initial_states", None)
        if initial_states is not None:
            states = parse_initial_states(binary, initial_states)[0]
            if len(states) != 1:
                raise InvalidParameterError(
                    f"the Digital Annealer takes one warm start; got {len(states)} states"
                )
            by_label = dict(zip(binary.variables, states[0].tolist(), strict=True))
            options["guidance_config"] = {
                str(i): bool(by_label[label]) for i, label in enumerate(order)
            }
        options.update(params)
        body = build_request_body(
            binary, order=order, solver_options=options, group_sizes=group_sizes
        )
        submitted = self._request("POST", "/v4/async/qubo/solve", body)
        job_id = submitted.get("job_id") if isinstance(submitted, dict) else None
        if not job_id:
            raise DAServiceError(f"the solve request returned no job_id: {str(submitted)[:200]}")
        result = self._wait_for(str(job_id), time_limit_sec + self.job_timeout)
        sampleset = _sampleset_from_solution(result, bqm, order)
        sampleset.info["job_id"] = str(job_id)
        return sampleset

    def _wait_for(self, job_id: str, limit: float) -> dict[str, Any]:
        path = f"/v4/async/jobs/result/{job_id}"
        deadline = time.monotonic() + limit
        finished = False
        try:
            while True:
                answer = self._request("GET", path)
                status = answer.get("status") if isinstance(answer, dict) else None
                if status == "Done":
                    finished = True
                    return answer
                if status in ("Error", "Canceled"):
                    finished = True
                    detail = answer.get("message") or answer.get("qubo_solution") or ""
                    raise DAJobError(f"job {job_id} ended with status {status}: {detail!s:.200}")
                if status not in ("Waiting", "Running"):
                    finished = True
                    raise DAServiceError(f"job {job_id} has an unknown status {status!r}")
                if time.monotonic() >= deadline:
                    raise DATimeoutError(
                        f"job {job_id} was not done after {limit:.0f} s; cancelled it. "
                        "Raise job_timeout or lower time_limit."
                    )
                time.sleep(self.poll_interval)
        finally:
            self._clean_up(job_id, cancel=not finished)

    def _clean_up(self, job_id: str, *, cancel: bool) -> None:
        # Best effort: a failed clean-up must not hide the solve's own outcome.
        try:
            if cancel:
                self._request("POST", "/v4/async/jobs/cancel", {"job_id": job_id})
            self._request("DELETE", f"/v4/async/jobs/result/{job_id}")
        except DAServiceError:
            pass


def _time_limit_sec(time_limit: Any) -> int:
    if isinstance(time_limit, bool) or not isinstance(time_limit, int | float):
        raise InvalidParameterError(f"time_limit must be seconds in 1..3600; got {time_limit!r}")
    seconds = math.ceil(time_limit)
    if not 1 <= seconds <= 3600:
        raise InvalidParameterError(f"time_limit must be seconds in 1..3600; got {time_limit!r}")
    return seconds


def _http_error(method: str, path: str, exc: urllib.error.HTTPError) -> DAServiceError:
    try:
        detail = exc.read()[:200].decode(errors="replace")
    except Exception:  # the body is only a hint
        detail = ""
    where = f"{method} {path} -> HTTP {exc.code}"
    if exc.code in (401, 403):
        return DAAuthenticationError(
            f"{where}: the API key was rejected; check {API_KEY_VARIABLE}", exc.code
        )
    if exc.code == 429:
        return DARateLimitError(
            f"{where}: too many jobs queued; wait for running jobs or retry later", exc.code
        )
    if exc.code == 400:
        return DARequestError(f"{where}: request refused (parameters or quota): {detail}", exc.code)
    return DAServiceError(f"{where}: {detail}", exc.code)


def _sampleset_from_solution(
    answer: dict[str, Any],
    bqm: dimod.BinaryQuadraticModel,
    order: list[Hashable],
) -> dimod.SampleSet:
    try:
        solution = answer["qubo_solution"]
        solutions = solution["solutions"]
        samples = np.zeros((len(solutions), len(order)), dtype=np.int8)
        frequencies = np.ones(len(solutions), dtype=np.int64)
        for row, item in enumerate(solutions):
            for key, value in item["configuration"].items():
                samples[row, int(key)] = 1 if value else 0
            frequencies[row] = int(item.get("frequency", 1))
        timing = solution.get("timing", {})
        info: dict[str, Any] = {
            f"{name}_s": float(timing[name]) / 1000.0
            for name in ("solve_time", "total_elapsed_time")
            if name in timing
        }
        info["da_energies"] = [float(item.get("energy", "nan")) for item in solutions]
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise DAServiceError(f"unreadable solution from the Digital Annealer: {exc!r}") from exc
    if not len(solutions):
        raise DAServiceError("the Digital Annealer returned no solutions")
    if bqm.vartype is dimod.SPIN:
        samples = 2 * samples - 1
    # Energies come from the caller's model, in its own vartype.
    return dimod.SampleSet.from_samples_bqm(
        (samples, order), bqm, num_occurrences=frequencies, info=info
    )

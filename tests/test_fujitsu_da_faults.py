"""``fujitsu-da`` against a misbehaving v4 server on 127.0.0.1: every fault ends typed and bounded.

Each test scripts the faults of the next requests per HTTP method; requests without a
scripted fault get the normal protocol (a job that is ``Done`` at once, every variable 0).
Longer than most test modules: the hostile server and every check against it stay together.
"""

from __future__ import annotations

import email.utils
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dimod
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bmfdsl.backends._http import HTTPCallError, Limits, _retry_after, call_json
from bmfdsl.backends.fujitsu_da import (
    DACleanupWarning,
    DARateLimitError,
    DAServiceError,
    DATimeoutError,
    FujitsuDABackend,
)
from bmfdsl.errors import (
    BmfdslError,
    InvalidCredentialsError,
    InvalidParameterError,
    MissingCredentialsError,
)

API_KEY = "fault-key-9f8e7d6c5b4a"

Fault = Callable[["FaultHandler"], None]


class FaultHandler(BaseHTTPRequestHandler):
    server: FaultServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except OSError:  # the client cut a drip or a huge body short: expected here
            self.close_connection = True

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.requests.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": dict(self.headers),
                "client_port": self.client_address[1],
            }
        )
        if self.command == "POST" and self.path.endswith("/qubo/solve"):
            body = json.loads(raw)
            terms = body["binary_polynomial"]["terms"]
            self.server.size = 1 + max((i for t in terms for i in t["p"]), default=-1)
        faults = self.server.faults.get(self.command, [])
        if faults:
            fault = faults.pop(0)
            if fault is not None:
                return fault(self)
        self.normal()

    do_GET = do_POST = do_DELETE = do_CONNECT = _serve  # noqa: N815 - http.server names them so

    def reply(self, code: int, payload: object, headers: dict[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def normal(self) -> None:
        if self.command == "POST" and self.path.endswith("/qubo/solve"):
            return self.reply(200, {"job_id": "job-1"})
        if self.command == "GET":
            return self.reply(200, done(solution_for(self.server.size)))
        return self.reply(200, {"status": "deleted" if self.command == "DELETE" else "ok"})


def solution_for(size: int, **overrides) -> dict:
    item = {"energy": 0.0, "frequency": 1, "configuration": {str(i): False for i in range(size)}}
    return {**item, **overrides}


def done(*solutions: dict) -> dict:
    return {
        "status": "Done",
        "qubo_solution": {"solutions": list(solutions), "timing": {"solve_time": "5"}},
    }


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FaultHandler)
        self.faults: dict[str, list[Fault | None]] = {}
        self.requests: list[dict] = []
        self.size = 0


SERVER = FaultServer()
OTHER = FaultServer()  # a second origin (another port) that must never see the key
for _server in (SERVER, OTHER):
    threading.Thread(target=_server.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{SERVER.server_address[1]}"
OTHER_URL = f"http://127.0.0.1:{OTHER.server_address[1]}"


@pytest.fixture(autouse=True)
def server(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for each in (SERVER, OTHER):
        each.faults, each.requests, each.size = {}, [], 0
    return SERVER


def backend(**options) -> FujitsuDABackend:
    settings = {
        "api_key": API_KEY,
        "poll_interval": 0.01,
        "request_timeout": 1.0,
        "job_timeout": 1.0,
        "backoff": 0.01,
        "max_backoff": 0.5,
    }
    return FujitsuDABackend(URL, **{**settings, **options})


def bqm() -> dimod.BinaryQuadraticModel:
    return dimod.BinaryQuadraticModel({"a": 1.0, "b": 1.0}, {("a", "b"): -0.5}, 0.0, "BINARY")


def methods(server: FaultServer) -> list[str]:
    return [r["method"] for r in server.requests]


# --- faults -----------------------------------------------------------------------------


def reset(handler: FaultHandler) -> None:
    """Close with RST: the client sees ECONNRESET (or RemoteDisconnected)."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.close_connection = True


def truncated(handler: FaultHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", "1000")
    handler.end_headers()
    handler.wfile.write(b'{"status": "Do')
    handler.wfile.flush()
    reset(handler)


def drip(handler: FaultHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", "100000")
    handler.end_headers()
    for _ in range(200):  # one byte every 0.1 s: 20 s if nobody stops it
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(0.1)


def huge(handler: FaultHandler) -> None:
    handler.send_response(200)
    handler.end_headers()  # no Content-Length: the body runs until the connection closes
    block = b" " * 65536
    for _ in range(64):  # 4 MiB
        handler.wfile.write(block)
    handler.close_connection = True


def status(code: int, retry_after: str | None = None) -> Fault:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return lambda handler: handler.reply(code, {"message": f"status {code}"}, headers)


def raw_body(data: bytes) -> Fault:
    return lambda handler: handler.reply(200, data)


def answer(payload: object) -> Fault:
    return lambda handler: handler.reply(200, payload)


def redirect(location: str, code: int = 302) -> Fault:
    return lambda handler: handler.reply(code, b"", {"Location": location})


# --- transport faults become one typed error, retried where idempotent -------------------


@pytest.mark.parametrize("fault", [reset, truncated], ids=["reset", "truncated"])
def test_a_broken_poll_is_retried_and_the_solve_succeeds(server, fault):
    server.faults = {"GET": [fault, fault]}
    sampleset = backend().sample(bqm(), num_reads=1, time_limit=1)
    assert sampleset.first.sample == {"a": 0, "b": 0}
    assert methods(server) == ["POST", "GET", "GET", "GET", "DELETE"]


@pytest.mark.parametrize("fault", [reset, truncated], ids=["reset", "truncated"])
def test_a_broken_submission_is_a_typed_error_and_not_resent(server, fault):
    server.faults = {"POST": [fault]}
    with pytest.raises(DAServiceError, match="connection") as caught:
        backend().sample(bqm(), time_limit=1)
    assert isinstance(caught.value, BmfdslError)
    assert methods(server) == ["POST"]  # a repeated POST could start a second paid job


def test_a_poll_that_keeps_failing_gives_up_after_max_retries(server):
    server.faults = {"GET": [reset] * 10}
    with pytest.raises(DAServiceError, match="connection"):
        backend(max_retries=2).sample(bqm(), time_limit=1)
    assert methods(server).count("GET") == 3
    assert methods(server)[-2:] == ["POST", "DELETE"]  # cancelled and deleted


@pytest.mark.parametrize("code", [429, 502, 503])
def test_transient_statuses_are_retried_honouring_retry_after(server, code):
    server.faults = {"GET": [status(code, "1")], "DELETE": [status(code, "0")]}
    start = time.perf_counter()
    sampleset = backend(max_backoff=5.0).sample(bqm(), num_reads=1, time_limit=1)
    elapsed = time.perf_counter() - start
    assert len(sampleset) == 1
    assert 1.0 <= elapsed < 2.5  # waited the second the server asked for, no more
    assert methods(server) == ["POST", "GET", "GET", "DELETE", "DELETE"]


def test_retry_after_is_capped_by_max_backoff(server):
    server.faults = {"GET": [status(503, "3600")]}
    start = time.perf_counter()
    backend(max_backoff=0.2).sample(bqm(), num_reads=1, time_limit=1)
    assert time.perf_counter() - start < 1.5


def test_a_rate_limited_submission_is_not_retried(server):
    server.faults = {"POST": [status(429, "1")]}
    with pytest.raises(DARateLimitError) as caught:
        backend().sample(bqm(), time_limit=1)
    assert caught.value.retry_after == 1.0
    assert methods(server) == ["POST"]


def test_a_dripping_server_cannot_outlast_the_solve_deadline(server):
    server.faults = {"GET": [drip] * 5}
    start = time.perf_counter()
    with pytest.raises(DATimeoutError):
        backend(request_timeout=60.0, job_timeout=0.5).sample(bqm(), time_limit=1)
    assert time.perf_counter() - start < 3.5  # 1.5 s deadline + a bounded clean-up


def test_a_huge_answer_is_refused_at_the_size_cap(server):
    server.faults = {"GET": [huge]}
    with pytest.raises(DAServiceError, match="max_response_bytes"):
        backend(max_response_bytes=1 << 20).sample(bqm(), time_limit=1)
    assert methods(server).count("GET") == 1  # the same answer again would not help


def test_an_announced_huge_answer_is_refused_before_reading(server):
    def announced(handler: FaultHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(300 * 2**20))
        handler.end_headers()
        handler.close_connection = True

    server.faults = {"GET": [announced]}
    with pytest.raises(DAServiceError, match="announced"):
        backend(max_response_bytes=1 << 20).sample(bqm(), time_limit=1)


def test_a_finished_result_survives_a_failed_clean_up(server):
    server.faults = {"DELETE": [reset] * 10}
    with pytest.warns(DACleanupWarning, match="job-1"):
        sampleset = backend(max_retries=1).sample(bqm(), num_reads=1, time_limit=1)
    assert sampleset.first.sample == {"a": 0, "b": 0}
    assert methods(server).count("DELETE") == 2


# --- protocol and parse faults -----------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "fault", "match"),
    [
        ("GET", raw_body(b"[" * 200_000), "malformed JSON"),
        ("GET", raw_body(b"\xff\xfe not json"), "malformed JSON"),
        ("GET", answer(["Done"]), "unknown status"),
        ("GET", answer({"status": "Done"}), "no qubo_solution"),
        ("GET", answer({"status": "Done", "qubo_solution": {"solutions": "x"}}), "not a list"),
        ("GET", answer(done()), "no solutions"),
        ("POST", answer({"job_id": "job 1"}), "job_id"),
        ("POST", answer({"job_id": "../../jobs"}), "job_id"),
        ("POST", answer({"nothing": True}), "job_id"),
        ("POST", status(500), "HTTP 500"),
    ],
    ids=[
        "deep-json",
        "bad-utf8",
        "list-answer",
        "no-solution",
        "solutions-not-list",
        "empty-solutions",
        "job-id-space",
        "job-id-path",
        "no-job-id",
        "500-on-post",
    ],
)
def test_protocol_faults_are_one_typed_error(server, method, fault, match):
    server.faults = {method: [fault]}
    with pytest.raises(DAServiceError, match=match) as caught:
        backend().sample(bqm(), time_limit=1)
    assert API_KEY not in str(caught.value)
    assert caught.value.__cause__ is None or isinstance(caught.value.__cause__, BmfdslError)


@pytest.mark.parametrize(
    ("solution", "match"),
    [
        (solution_for(2, configuration=[False, False]), "configuration"),
        (solution_for(2, configuration={"0": False}), "assigns 1 variables"),
        (solution_for(2, configuration={"0": False, "-1": True}), "index '-1'"),
        (solution_for(2, configuration={"0": False, "2": True}), "index '2'"),
        (solution_for(2, configuration={"0": False, "01": True}), "index '01'"),
        (solution_for(2, configuration={"0": False, "1": "false"}), "non-boolean"),
        (solution_for(2, configuration={"0": False, "1": 1}), "non-boolean"),
        (solution_for(2, frequency=0), "frequency"),
        (solution_for(2, frequency=-3), "frequency"),
        (solution_for(2, frequency=1.5), "frequency"),
        (solution_for(2, energy="low"), "energy"),
        (solution_for(2, configuration={"0": False, "9" * 5000: True}), "index '9999"),
        (solution_for(2, frequency=10**30), "frequency"),
        (solution_for(2, energy=10**400), "energy out of range"),
    ],
    ids=[
        "list",
        "missing-variable",
        "negative-index",
        "index-out-of-range",
        "leading-zero",
        "string-false",
        "int-value",
        "frequency-0",
        "frequency-negative",
        "frequency-float",
        "energy-string",
        "index-5000-digits",
        "frequency-overflow",
        "energy-overflow",
    ],
)
def test_bad_solutions_are_refused(server, solution, match):
    server.faults = {"GET": [answer(done(solution))]}
    with pytest.raises(DAServiceError, match=match):
        backend().sample(bqm(), time_limit=1)


def test_a_valid_solution_is_read_exactly(server):
    good = solution_for(2, configuration={"1": True, "0": False}, frequency=3)
    server.faults = {"GET": [answer(done(good))]}
    sampleset = backend().sample(bqm(), num_reads=1, time_limit=1)
    assert sampleset.first.sample == {"a": 0, "b": 1}
    assert sampleset.record.num_occurrences.tolist() == [3]


# --- redirects, URLs and the key ---------------------------------------------------------


def test_a_redirect_to_another_origin_is_refused_without_sending_the_key(server):
    server.faults = {"POST": [redirect(OTHER_URL + "/v4/async/qubo/solve", 307)]}
    with pytest.raises(DAServiceError, match="another origin"):
        backend().sample(bqm(), time_limit=1)
    assert OTHER.requests == []


def test_a_redirect_loop_ends_in_one_typed_error(server):
    server.faults = {"GET": [redirect("/v4/async/jobs/result/job-1")] * 10}
    with pytest.raises(DAServiceError, match="more than 5 redirects"):
        backend().sample(bqm(), time_limit=1)
    assert methods(server).count("GET") == 6


def test_a_same_origin_redirect_is_followed(server):
    server.faults = {"GET": [redirect("/v4/async/jobs/result/job-1?again=1")]}
    sampleset = backend().sample(bqm(), num_reads=1, time_limit=1)
    assert len(sampleset) == 1
    paths = [r["path"] for r in server.requests if r["method"] == "GET"]
    assert paths == ["/v4/async/jobs/result/job-1", "/v4/async/jobs/result/job-1?again=1"]


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://example.com/da", "http://example.com/da", "https://", "da"],
)
def test_unsafe_or_malformed_urls_are_refused(url):
    with pytest.raises(InvalidParameterError) as caught:
        FujitsuDABackend(url, api_key=API_KEY)
    assert API_KEY not in str(caught.value)


def test_plain_http_to_a_remote_host_needs_the_explicit_opt_out():
    sampler = FujitsuDABackend("http://10.0.0.5:8080/da", api_key=API_KEY, allow_http=True)
    assert sampler.url == "http://10.0.0.5:8080/da"
    assert FujitsuDABackend("https://example.com/da", api_key=API_KEY).url.startswith("https")


def test_url_credentials_are_redacted_and_sent_only_as_basic_auth(server):
    url = URL.replace("http://", "http://user:url-password-77@")
    sampler = FujitsuDABackend(url, api_key=API_KEY, poll_interval=0.01)
    for text in (repr(sampler), sampler.url, str(sampler.properties)):
        assert "url-password-77" not in text
    sampler.sample(bqm(), num_reads=1, time_limit=1)
    assert server.requests[0]["headers"]["Authorization"].startswith("Basic ")
    with pytest.raises(InvalidParameterError) as caught:
        FujitsuDABackend("ftp://user:url-password-77@example.com", api_key=API_KEY)
    assert "url-password-77" not in str(caught.value)


def test_a_key_with_a_trailing_newline_is_stripped(server, monkeypatch):
    monkeypatch.setenv("BMFDSL_DA_API_KEY", API_KEY + "\n")
    sampler = FujitsuDABackend(URL, poll_interval=0.01)
    sampler.sample(bqm(), num_reads=1, time_limit=1)
    assert {r["headers"]["X-Api-Key"] for r in server.requests} == {API_KEY}


@pytest.mark.parametrize("key", ["abc\ndef", "abc\x00def", "abc\x1b[2Jdef", "abcdéf"])
def test_a_key_with_control_characters_names_the_variable_not_the_value(monkeypatch, key):
    if "\x00" not in key:  # the environment cannot hold a NUL
        monkeypatch.setenv("BMFDSL_DA_API_KEY", key)
        with pytest.raises(InvalidCredentialsError, match="BMFDSL_DA_API_KEY") as caught:
            FujitsuDABackend(URL)
        assert "abc" not in str(caught.value) and "def" not in str(caught.value)
    with pytest.raises(InvalidCredentialsError, match="api_key") as caught:
        FujitsuDABackend(URL, api_key=key)
    assert "abc" not in str(caught.value) and "def" not in str(caught.value)


def test_a_blank_key_counts_as_missing(monkeypatch):
    monkeypatch.setenv("BMFDSL_DA_API_KEY", "  \n")
    with pytest.raises(MissingCredentialsError, match="BMFDSL_DA_API_KEY"):
        FujitsuDABackend(URL)


def test_a_server_echoing_the_key_has_it_scrubbed(server):
    server.faults = {"POST": [lambda h: h.reply(400, {"message": f"bad key {API_KEY}"})]}
    with pytest.raises(DAServiceError) as caught:
        backend().sample(bqm(), time_limit=1)
    assert API_KEY not in str(caught.value) and "***" in str(caught.value)


# --- parameters that used to escape as raw exceptions -------------------------------------


@pytest.mark.parametrize(
    "params",
    [{"time_limit": float("inf")}, {"time_limit": float("nan")}, {"num_run": float("inf")}],
)
def test_non_finite_parameters_are_refused_before_any_request(server, params):
    with pytest.raises(InvalidParameterError):
        backend().sample(bqm(), **params)
    assert server.requests == []


def test_a_remote_http_url_goes_through_the_proxy_without_url_credentials(server, monkeypatch):
    monkeypatch.setenv("http_proxy", URL)  # our server plays the proxy
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    sampler = FujitsuDABackend(
        "http://user:proxy-pass-3@da.invalid/api", api_key=API_KEY, allow_http=True
    )
    sampleset = sampler.sample(bqm(), num_reads=1, time_limit=1)
    assert len(sampleset) == 1
    paths = [r["path"] for r in server.requests]
    assert paths[0] == "http://da.invalid/api/v4/async/qubo/solve"
    assert all(p.startswith("http://da.invalid/api/") for p in paths)
    assert not any("proxy-pass-3" in p for p in paths)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["0", "1", "-1", "x"]), children, max_size=3)
    ),
    max_leaves=12,
)
SOLUTION = st.fixed_dictionaries(
    {"configuration": st.dictionaries(st.sampled_from(["0", "1", "2", "01"]), JSON, max_size=3)},
    optional={"frequency": JSON, "energy": JSON},
)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.lists(SOLUTION | JSON, max_size=3))
def test_any_answer_is_a_valid_sampleset_or_one_typed_error(solutions):
    SERVER.faults, SERVER.requests = {"GET": [answer(done(*solutions))]}, []
    try:
        sampleset = backend().sample(bqm(), num_reads=3, time_limit=1)
    except DAServiceError as error:
        assert type(error).__module__ == "bmfdsl.backends.fujitsu_da"
        return
    assert set(sampleset.variables) == {"a", "b"}
    assert set(sampleset.record.sample.ravel().tolist()) <= {0, 1}
    assert (sampleset.record.num_occurrences >= 1).all()
    for item in solutions:  # only complete boolean configurations get through
        assert sorted(item["configuration"]) == ["0", "1"]
        assert all(isinstance(v, bool) for v in item["configuration"].values())


# --- the HTTP layer on urllib3: pooling, retry policy, watchdog, proxies, logs -------------


def test_a_solve_reuses_one_pooled_connection(server):
    server.faults = {"GET": [answer({"status": "Running"})] * 2}
    backend().sample(bqm(), num_reads=1, time_limit=1)
    assert methods(server) == ["POST", "GET", "GET", "GET", "DELETE"]
    assert len({r["client_port"] for r in server.requests}) == 1  # keep-alive, one socket


def drip_headers(handler: FaultHandler) -> None:
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    for _ in range(200):  # a header that never ends: one byte every 0.1 s
        handler.wfile.write(b"a")
        handler.wfile.flush()
        time.sleep(0.1)


def test_a_server_dripping_its_headers_cannot_outlast_the_solve_deadline(server):
    server.faults = {"GET": [drip_headers] * 5}
    start = time.perf_counter()
    with pytest.raises(DATimeoutError):
        backend(request_timeout=60.0, job_timeout=0.5).sample(bqm(), time_limit=1)
    assert time.perf_counter() - start < 3.5  # 1.5 s deadline + a bounded clean-up


def test_the_first_retry_waits_backoff(server):
    server.faults = {"GET": [reset]}
    start = time.perf_counter()
    backend(backoff=0.4, max_backoff=1.0).sample(bqm(), num_reads=1, time_limit=1)
    assert 0.4 <= time.perf_counter() - start < 1.5  # urllib3's own first wait would be 0
    assert methods(server) == ["POST", "GET", "GET", "DELETE"]


def test_a_413_asking_to_retry_after_is_not_retried(server):
    server.faults = {"GET": [status(413, "0")]}  # urllib3 alone would retry it
    with pytest.raises(DAServiceError, match="HTTP 413"):
        backend().sample(bqm(), time_limit=1)
    assert methods(server).count("GET") == 1


def test_a_wait_that_would_pass_the_deadline_raises_the_last_failure_at_once(server):
    server.faults = {"GET": [status(503, "3600")]}
    start = time.perf_counter()
    with pytest.raises(DAServiceError, match="HTTP 503") as caught:
        backend(max_backoff=60.0, job_timeout=0.5).sample(bqm(), time_limit=1)
    assert time.perf_counter() - start < 1.0
    assert caught.value.retry_after == 3600.0
    assert methods(server) == ["POST", "GET", "POST", "DELETE"]  # cancelled and deleted


@pytest.mark.parametrize("fault", [reset, status(503)], ids=["reset", "503"])
def test_call_json_never_repeats_a_post_even_when_asked(server, fault):
    server.faults = {"POST": [fault] * 3}
    limits = Limits(
        request_timeout=1.0, max_retries=3, backoff=0.01, max_backoff=0.1, max_response_bytes=1024
    )
    with pytest.raises(HTTPCallError) as caught:
        call_json(
            "POST", URL + "/v4/async/jobs/cancel", b"{}", {},
            deadline=time.monotonic() + 5, limits=limits, retry=True,
        )  # fmt: skip
    assert caught.value.kind in ("transport", "status")
    assert methods(server) == ["POST"]


def test_https_through_a_proxy_tunnels_without_the_key_or_url_credentials(server, monkeypatch):
    monkeypatch.setenv("https_proxy", URL)  # our server plays the proxy and refuses the tunnel
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    server.faults = {"CONNECT": [status(403)]}
    sampler = FujitsuDABackend("https://user:tunnel-pass-5@da.invalid/api", api_key=API_KEY)
    with pytest.raises(DAServiceError, match="connection") as caught:
        sampler.sample(bqm(), time_limit=1)
    assert "tunnel-pass-5" not in str(caught.value) and API_KEY not in str(caught.value)
    [tunnel] = server.requests
    assert (tunnel["method"], tunnel["path"]) == ("CONNECT", "da.invalid:443")
    sent = {name.lower(): value for name, value in tunnel["headers"].items()}
    assert "x-api-key" not in sent and "authorization" not in sent


def test_urllib3_logs_neither_the_key_nor_url_credentials(server, caplog):
    server.faults = {"GET": [reset, status(503)]}  # retries make urllib3 log more
    url = URL.replace("http://", "http://user:log-pass-8@")
    sampler = FujitsuDABackend(url, api_key=API_KEY, poll_interval=0.01, backoff=0.01)
    with caplog.at_level("DEBUG", logger="urllib3"):
        sampler.sample(bqm(), num_reads=1, time_limit=1)
    assert "127.0.0.1" in caplog.text  # urllib3 did log the calls
    assert "log-pass-8" not in caplog.text and API_KEY not in caplog.text


def test_retry_after_is_read_as_seconds_or_an_http_date():
    assert _retry_after(" 7 ") == 7.0
    assert 25.0 < (_retry_after(email.utils.formatdate(time.time() + 30, usegmt=True)) or 0) <= 30
    for unreadable in ("soon", "-1", "9" * 5000, ""):
        assert _retry_after(unreadable) is None


def test_a_refused_connection_names_the_socket_error(server):
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    sampler = FujitsuDABackend(f"http://127.0.0.1:{closed}", api_key=API_KEY)
    with pytest.raises(DAServiceError, match=r"connection failed \(ConnectionRefusedError: "):
        sampler.sample(bqm(), time_limit=1)


# --- issue 24 item 8: a server cannot forge output lines or send terminal escapes ----------


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_item8_a_service_error_body_with_escapes_is_shown_escaped(server, method):
    forged = "bad\r\nbmfdsl: all good, exit 0\x1b[31m\x07"
    if method == "POST":
        server.faults = {"POST": [lambda h: h.reply(400, forged.encode())]}  # raw, not JSON
    else:
        job = {"status": "Error", "message": forged}
        server.faults = {"GET": [lambda h: h.reply(200, job)]}
    with pytest.raises(DAServiceError) as caught:
        backend(max_retries=0).sample(bqm(), time_limit=1)
    text = str(caught.value)
    assert text.isprintable() and "\n" not in text and "\x1b" not in text
    assert "all good" in text  # shown, escaped, not dropped

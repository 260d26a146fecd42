"""``fujitsu-da`` against a small v4 asynchronous API server on 127.0.0.1 started here.

The server solves each QUBO by brute force from the request's terms (honouring
``one_way_one_hot_groups``), so the adapter's encoding and decoding are checked against an
independent reading of the protocol.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dimod
import numpy as np
import pytest

from bmfdsl.backends.fujitsu_da import (
    DAAuthenticationError,
    DAJobError,
    DARateLimitError,
    DARequestError,
    DAServiceError,
    DATimeoutError,
    FujitsuDABackend,
)
from bmfdsl.errors import BmfdslError, MissingCredentialsError, SolverError, UnknownNameError
from bmfdsl.solvers import get_backend
from bmfdsl.testing import (
    check_decode,
    check_parameters_honest,
    check_timing_info,
    dimod_test_case,
    small_bqm,
)

API_KEY = "da-key-0123456789-secret"


class DAState:
    """What the fake service does next, and every request it saw."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.mode = "normal"  # error | canceled | malformed | 400 | 401 | 429 | hang | slow
        self.hang_seconds = 1.0
        self.requests: list[dict] = []
        self.jobs: dict[str, dict] = {}
        self.counter = 0


def solve_by_brute_force(body: dict) -> list[dict]:
    terms = body["binary_polynomial"]["terms"]
    options = body["fujitsuDA3"]
    size = 1 + max((i for term in terms for i in term["p"]), default=-1)
    groups = options.get("one_way_one_hot_groups", {}).get("numbers", [])
    size = max(size, sum(groups))
    scored = []
    for bits in itertools.product((0, 1), repeat=size):
        position = 0
        feasible = True
        for group in groups:  # one-hot variables come first, group by group
            feasible &= sum(bits[position : position + group]) == 1
            position += group
        if not feasible:
            continue
        energy = sum(term["c"] * np.prod([bits[i] for i in term["p"]]) for term in terms)
        scored.append((float(energy), bits))
    scored.sort(key=lambda item: item[0])
    return [
        {
            # deliberately off: the adapter must recompute energies itself
            "energy": energy + 1000.0,
            "penalty_energy": 0,
            "frequency": 1,
            "configuration": {str(i): bool(bit) for i, bit in enumerate(bits)},
        }
        for energy, bits in scored[: options.get("num_output_solution", 5)]
    ]


class DAHandler(BaseHTTPRequestHandler):
    server: DAServer

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _record(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        entry = {
            "method": self.command,
            "path": self.path,
            "headers": dict(self.headers),
            "body": json.loads(raw) if raw else None,
        }
        self.server.state.requests.append(entry)
        return entry

    def _reply(self, code: int, payload: object | str) -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        state = self.server.state
        entry = self._record()
        if entry["headers"].get("X-Api-Key") != API_KEY or state.mode == "401":
            return self._reply(401, {"message": "Unauthorized"})
        if self.path == "/v4/async/jobs/cancel":
            state.jobs.get(entry["body"]["job_id"], {})["canceled"] = True
            return self._reply(200, {"job_id": entry["body"]["job_id"]})
        if self.path != "/v4/async/qubo/solve":
            return self._reply(404, {"message": "not found"})
        if state.mode == "hang":
            time.sleep(state.hang_seconds)
        if state.mode == "429":
            return self._reply(429, {"message": "too many jobs"})
        if state.mode == "400":
            return self._reply(400, {"message": "quota exceeded"})
        state.counter += 1
        job_id = f"job-{state.counter}"
        state.jobs[job_id] = {"body": entry["body"], "polls": 0}
        return self._reply(200, {"job_id": job_id})

    def do_GET(self) -> None:
        state = self.server.state
        self._record()
        job_id = self.path.rsplit("/", 1)[-1]
        job = state.jobs.get(job_id)
        if not self.path.startswith("/v4/async/jobs/result/") or job is None:
            return self._reply(404, {"message": "no such job"})
        job["polls"] += 1
        if state.mode == "malformed":
            return self._reply(200, '{"status": "Done", "qubo_solution": ')
        if state.mode == "slow" or job["polls"] < 3:
            return self._reply(200, {"status": "Waiting" if job["polls"] == 1 else "Running"})
        if state.mode in ("error", "canceled"):
            status = "Error" if state.mode == "error" else "Canceled"
            return self._reply(200, {"status": status, "message": "internal failure"})
        solution = {
            "result_status": True,
            "progress": [],
            "solutions": solve_by_brute_force(job["body"]),
            "timing": {"solve_time": "12", "total_elapsed_time": "20"},
        }
        return self._reply(200, {"status": "Done", "qubo_solution": solution})

    def do_DELETE(self) -> None:
        state = self.server.state
        self._record()
        job_id = self.path.rsplit("/", 1)[-1]
        if state.jobs.pop(job_id, None) is None:
            return self._reply(404, {"message": "no such job"})
        return self._reply(200, {"status": "deleted"})


class DAServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), DAHandler)
        self.state = DAState()


# One server for the module: dimod's test classes build their samplers at import time.
SERVER = DAServer()
threading.Thread(target=SERVER.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{SERVER.server_address[1]}"


def backend(**options) -> FujitsuDABackend:
    settings = {"api_key": API_KEY, "poll_interval": 0.01, "request_timeout": 5.0}
    return FujitsuDABackend(URL, **{**settings, **options})


@pytest.fixture(autouse=True)
def fresh_server(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    SERVER.state.reset()
    yield SERVER.state
    SERVER.state.reset()


TestDimodConformanceDA = dimod_test_case(backend)


def requests_of(state: DAState, method: str) -> list[dict]:
    return [r for r in state.requests if r["method"] == method]


def test_job_lifecycle_waiting_running_done_then_delete(fresh_server):
    bqm = small_bqm()
    sampleset = backend().sample(bqm, num_reads=3, time_limit=2)
    posts, gets, deletes = (requests_of(fresh_server, m) for m in ("POST", "GET", "DELETE"))
    assert [p["path"] for p in posts] == ["/v4/async/qubo/solve"]
    assert [g["path"] for g in gets] == ["/v4/async/jobs/result/job-1"] * 3
    assert [d["path"] for d in deletes] == ["/v4/async/jobs/result/job-1"]
    assert fresh_server.jobs == {}
    for request in fresh_server.requests:
        assert request["headers"]["X-Api-Key"] == API_KEY
        assert request["headers"]["Content-Type"] == "application/json"
    ground = dimod.ExactSolver().sample(bqm).first.energy
    assert len(sampleset) == 3
    assert sampleset.first.energy == pytest.approx(ground)
    for sample, energy in sampleset.data(["sample", "energy"]):  # recomputed locally
        assert energy == pytest.approx(bqm.energy(sample))
    assert sampleset.info["job_id"] == "job-1"
    assert sampleset.info["solve_time_s"] == pytest.approx(0.012)
    assert sampleset.info["da_energies"][0] == pytest.approx(ground + 1000.0)


def test_request_body_encodes_the_qubo_and_the_options(fresh_server):
    bqm = small_bqm()
    backend().sample(bqm, num_reads=4, time_limit=2.5, num_run=8, gs_level=10, gs_cutoff=4000)
    body = requests_of(fresh_server, "POST")[0]["body"]
    assert body["fujitsuDA3"] == {
        "time_limit_sec": 3,
        "num_output_solution": 4,
        "num_run": 8,
        "gs_level": 10,
        "gs_cutoff": 4000,
    }
    terms = body["binary_polynomial"]["terms"]
    assert {"c": 0.25, "p": []} in terms
    assert all(len(t["p"]) <= 2 and t["p"] == sorted(t["p"]) for t in terms)
    # the terms, read independently, give the model's energy on every state
    labels = list(bqm.variables)
    for bits in itertools.product((0, 1), repeat=len(labels)):
        expected = bqm.energy(dict(zip(labels, bits, strict=True)))
        got = sum(t["c"] * np.prod([bits[i] for i in t["p"]]) for t in terms)
        assert got == pytest.approx(expected)


def test_one_hot_groups_are_sent_natively_with_their_variables_first(fresh_server):
    # unconstrained, every variable wants to be 1; one-hot allows one per group
    labels = ["z", "a0", "a1", "b0", "b1", "b2"]
    bqm = dimod.BinaryQuadraticModel({v: -1.0 for v in labels}, {("a1", "b2"): -0.5}, 0, "BINARY")
    groups = [["a0", "a1"], ["b0", "b1", "b2"]]
    sampleset = backend().sample(bqm, one_hot_groups=groups, num_reads=2, one_hot_level=3)
    options = requests_of(fresh_server, "POST")[0]["body"]["fujitsuDA3"]
    assert options["one_way_one_hot_groups"] == {"numbers": [2, 3]}
    assert options["one_hot_level"] == 3
    for sample in sampleset.samples():
        assert [sum(sample[v] for v in group) for group in groups] == [1, 1]
    best = sampleset.first.sample
    assert best["a1"] == best["b2"] == best["z"] == 1


def test_spin_models_come_back_as_spins(fresh_server):
    bqm = small_bqm("SPIN")
    sampleset = backend().sample(bqm, num_reads=2)
    assert sampleset.vartype is dimod.SPIN
    assert set(np.unique(sampleset.record.sample)) <= {-1, 1}
    assert sampleset.first.energy == pytest.approx(dimod.ExactSolver().sample(bqm).first.energy)


def test_a_warm_start_is_sent_as_guidance_config(fresh_server):
    bqm = small_bqm()
    start = {v: i % 2 for i, v in enumerate(bqm.variables)}
    backend().sample(bqm, initial_states=start)
    guidance = requests_of(fresh_server, "POST")[0]["body"]["fujitsuDA3"]["guidance_config"]
    assert guidance == {str(i): bool(i % 2) for i in range(len(start))}


def test_error_status_raises_a_job_error_and_deletes_the_job(fresh_server):
    fresh_server.mode = "error"
    with pytest.raises(DAJobError, match="Error"):
        backend().sample(small_bqm())
    assert [d["path"] for d in requests_of(fresh_server, "DELETE")] == [
        "/v4/async/jobs/result/job-1"
    ]


def test_canceled_status_raises_a_job_error(fresh_server):
    fresh_server.mode = "canceled"
    with pytest.raises(DAJobError, match="Canceled"):
        backend().sample(small_bqm())


def test_malformed_json_is_a_service_error(fresh_server):
    fresh_server.mode = "malformed"
    with pytest.raises(DAServiceError, match="malformed JSON"):
        backend().sample(small_bqm())
    assert requests_of(fresh_server, "DELETE")  # cleaned up anyway


@pytest.mark.parametrize(
    ("mode", "error"),
    [("401", DAAuthenticationError), ("429", DARateLimitError), ("400", DARequestError)],
)
def test_http_errors_map_to_typed_errors(fresh_server, mode, error):
    fresh_server.mode = mode
    with pytest.raises(error) as caught:
        backend().sample(small_bqm())
    assert isinstance(caught.value, SolverError) and isinstance(caught.value, BmfdslError)
    assert caught.value.status == int(mode)
    assert API_KEY not in str(caught.value)


def test_a_wrong_key_is_an_authentication_error_naming_the_variable(fresh_server):
    with pytest.raises(DAAuthenticationError, match="BMFDSL_DA_API_KEY") as caught:
        backend(api_key="wrong-key").sample(small_bqm())
    assert "wrong-key" not in str(caught.value)


def test_a_request_timeout_is_a_timeout_error(fresh_server):
    fresh_server.mode = "hang"
    fresh_server.hang_seconds = 1.0
    start = time.perf_counter()
    with pytest.raises(DATimeoutError) as caught:
        backend(request_timeout=0.2).sample(small_bqm())
    assert isinstance(caught.value, TimeoutError)
    assert time.perf_counter() - start < 0.9


def test_a_slow_job_times_out_and_is_cancelled_and_deleted(fresh_server):
    fresh_server.mode = "slow"
    start = time.perf_counter()
    with pytest.raises(DATimeoutError, match="job_timeout"):
        backend(job_timeout=0.2, poll_interval=0.05).sample(small_bqm(), time_limit=0.1)
    elapsed = time.perf_counter() - start
    assert 1.2 <= elapsed < 3.0  # time_limit rounds up to 1 s, plus job_timeout
    cancels = [r for r in requests_of(fresh_server, "POST") if r["path"].endswith("cancel")]
    assert [c["body"] for c in cancels] == [{"job_id": "job-1"}]
    assert [d["path"] for d in requests_of(fresh_server, "DELETE")] == [
        "/v4/async/jobs/result/job-1"
    ]


def test_missing_api_key_names_the_environment_variable(monkeypatch):
    monkeypatch.delenv("BMFDSL_DA_API_KEY", raising=False)
    with pytest.raises(MissingCredentialsError, match="BMFDSL_DA_API_KEY"):
        get_backend("fujitsu-da")


def test_url_and_key_come_from_the_environment(fresh_server, monkeypatch):
    monkeypatch.setenv("BMFDSL_DA_API_KEY", API_KEY)
    monkeypatch.setenv("BMFDSL_DA_URL", URL + "/")
    sampler = get_backend("fujitsu-da", poll_interval=0.01)
    assert sampler.url == URL
    assert API_KEY not in repr(sampler) and API_KEY not in str(sampler.properties)
    assert len(sampler.sample(small_bqm(), num_reads=1)) == 1
    methods = [r["method"] for r in fresh_server.requests]  # it talked to our server
    assert methods == ["POST", "GET", "GET", "GET", "DELETE"]


def test_constructing_contacts_nothing(fresh_server):
    backend()
    assert fresh_server.requests == []


@pytest.mark.parametrize(
    "params",
    [
        {"time_limit": 0},
        {"time_limit": 3601},
        {"num_reads": 1025},
        {"one_hot_groups": [["a"], ["a", "b"]]},
        {"one_hot_groups": [["nope"]]},
        {"initial_states": [dict.fromkeys("ab", 0)] * 2},
    ],
)
def test_bad_parameters_are_refused_before_any_request(fresh_server, params):
    from bmfdsl.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError):
        backend().sample(dimod.BinaryQuadraticModel({"a": 1, "b": -1}, {}, 0, "BINARY"), **params)
    assert fresh_server.requests == []


def test_unknown_parameter_lists_the_valid_ones():
    with pytest.raises(UnknownNameError, match="one_hot_groups"):
        backend().sample(small_bqm(), seed=1)


def test_conformance_kit_checks(fresh_server):
    examples = {
        "time_limit": 1,
        "num_reads": 2,
        "initial_states": None,
        "one_hot_groups": [["a", "b"]],
        "num_run": 4,
        "num_group": 1,
        "gs_level": 5,
        "gs_cutoff": 8000,
        "one_hot_level": 3,
        "one_hot_cutoff": 100,
        "target_energy": -10.0,
    }
    check_parameters_honest(backend(), examples)
    check_timing_info(backend())
    check_decode(backend(), num_reads=5)


@pytest.mark.cloud
def test_real_digital_annealer_solves_a_tiny_model():
    sampleset = get_backend("fujitsu-da").sample(small_bqm(), time_limit=1, num_reads=2)
    ground = dimod.ExactSolver().sample(small_bqm()).first.energy
    assert sampleset.first.energy == pytest.approx(ground)

"""Bounded JSON-over-HTTP calls for the cloud adapters, on urllib3.

:func:`call_json` makes one API call and either returns the decoded JSON answer or raises
one :class:`HTTPCallError` saying what went wrong; the adapter words it as its own typed
error.

urllib3 carries the calls: keep-alive connections pooled per process (and per proxy), TLS
with certificate checks, ``CONNECT`` tunnels, connect and read timeouts, and the retry
policy (:class:`urllib3.util.Retry`: which failures and statuses are worth repeating, for
which methods, how often, the capped exponential backoff, how ``Retry-After`` reads). This
module adds what urllib3 does not do:

* one ``deadline`` (``time.monotonic()`` seconds) bounds every request, retry wait and byte:
  a watchdog shuts the call's sockets at the limit, so a server that drips its headers or
  body cannot outlast it (urllib3's timeouts bound each socket operation, not the whole);
* a call is repeated only with ``retry=True`` and only for an idempotent method: a solve
  ``POST`` starts a paid job and is never sent twice, not after a reset, nor after a 5xx;
* ``retry=True`` repeats a call after a reset, a timeout, a body cut short or HTTP
  429/500/502/503/504, waiting ``backoff * 2**n`` seconds before the n-th retry (urllib3's
  own first wait is 0), or longer if ``Retry-After`` asks (for every one of those statuses),
  always capped at ``max_backoff`` and never past the deadline: a wait that would end after
  it raises the last failure instead;
* answers are read undecoded, in pieces, up to ``max_response_bytes`` (an announced larger
  one is refused before reading); a body cut short is noticed; the answer must be JSON;
* redirects are followed (5 at most) only within the same origin. urllib3 follows any
  redirect and at most strips named headers on the way to another host, which still sends
  the request (for a 307 the whole QUBO) there; so its redirects are off here and another
  origin is refused before anything is sent to it;
* ``user:password@`` in the URL becomes basic auth and is taken out of the URL urllib3 sees,
  so it is in none of its messages or logs; the environment's proxies are used, except for
  this machine (and the proxy's own ``user:password@`` is not sent).

The retry loop is this module's, with urllib3's :class:`~urllib3.util.Retry` as its policy:
urllib3's own loop cannot repeat a call whose streamed body broke, sleeps without a
deadline, and honours ``Retry-After`` uncapped.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import json
import os
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any, Literal

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import HTTPError, InvalidHeader, NewConnectionError
from urllib3.exceptions import TimeoutError as SocketTimeoutError
from urllib3.response import BaseHTTPResponse
from urllib3.util import Retry, Timeout

from bmfdsl.credentials import is_loopback, redact_url, service_text

TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_REDIRECTS = 5
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_CHUNK_BYTES = 1 << 16

FailureKind = Literal["transport", "timeout", "deadline", "status", "redirect", "answer"]


@dataclass(frozen=True)
class Limits:
    """How long, how often and how much (see the module docstring)."""

    request_timeout: float
    max_retries: int
    backoff: float
    max_backoff: float
    max_response_bytes: int


class HTTPCallError(Exception):
    """A failed call, before the adapter words it as its own typed error.

    Attributes:
        kind: ``transport`` (reset, refused, truncated), ``timeout`` (the request's own
            timeout), ``deadline`` (the caller's deadline), ``status`` (an HTTP error
            status), ``redirect`` (to another origin) or ``answer`` (not JSON, or over the
            size cap: repeating the call would not help).
        status: the HTTP status, when there was one.
        body: the first bytes of an error answer (a hint only).
        retry_after: seconds the server asked to wait, if it did.
    """

    def __init__(
        self,
        kind: FailureKind,
        reason: str,
        *,
        status: int | None = None,
        body: bytes = b"",
        retry_after: float | None = None,
    ) -> None:
        reason = service_text(reason)  # it may quote the server (a redirect target, a reset)
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.status = status
        self.body = body
        self.retry_after = retry_after


def call_json(
    method: str,
    url: str,
    body: bytes | None,
    headers: Mapping[str, str],
    *,
    deadline: float,
    limits: Limits,
    retry: bool = False,
) -> Any:
    """The JSON answer of one call (``{}`` for an empty body); raises :class:`HTTPCallError`.

    ``retry`` allows repeating the call on transient failures; it is ignored for methods
    that are not idempotent (``POST``).
    """
    policy = _retry_policy(method, limits, retry=retry)
    origin = _origin(url)
    redirects = 0
    while True:
        try:
            response, raw = _exchange(method, url, body, headers, deadline, limits)
        except HTTPCallError as failure:
            if failure.kind not in ("transport", "timeout"):
                raise
            cause = failure.__cause__
            error = cause if isinstance(cause, Exception) else None
            policy = _next_attempt(policy, method, url, failure, deadline, error=error)
            continue
        if response.status in _REDIRECT_STATUSES:
            redirects += 1
            url = _redirect_target(url, origin, response, redirects)
            continue
        try:
            return _decode(response, raw)
        except HTTPCallError as failure:
            if failure.kind != "status" or not policy.is_retry(
                method, response.status, failure.retry_after is not None
            ):
                raise
            policy = _next_attempt(policy, method, url, failure, deadline, response=response)


def path_of(url: str) -> str:
    """The path and query of ``url``, for messages.

    >>> path_of("https://u:p@host/da/v4/jobs?x=1")
    '/da/v4/jobs?x=1'
    """
    parts = urllib.parse.urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


# --- the retry policy --------------------------------------------------------------------


class _RetryPolicy(Retry):
    """urllib3's policy, with the waits this module promises.

    The first retry waits ``backoff`` (urllib3's waits 0), and ``Retry-After`` is honoured
    for every transient status (urllib3's: 413, 429 and 503 only, making a 413 retried).
    """

    RETRY_AFTER_STATUS_CODES = TRANSIENT_STATUSES

    def get_backoff_time(self) -> float:
        failures = len(self.history)  # redirects are followed outside it: every entry failed
        if failures == 0:
            return 0.0
        return float(min(self.backoff_max, self.backoff_factor * 2 ** (failures - 1)))

    def wait_after(self, failure: HTTPCallError) -> float:
        """Seconds to wait before repeating the call that ended in ``failure``."""
        wait = self.get_backoff_time()
        if self.respect_retry_after_header and failure.retry_after is not None:
            wait = max(wait, failure.retry_after)
        return min(self.backoff_max, wait)


def _retry_policy(method: str, limits: Limits, *, retry: bool) -> _RetryPolicy:
    idempotent = method.upper() in Retry.DEFAULT_ALLOWED_METHODS
    return _RetryPolicy(
        total=limits.max_retries if retry and idempotent else 0,
        status_forcelist=TRANSIENT_STATUSES,
        backoff_factor=limits.backoff,
        backoff_max=limits.max_backoff,
        respect_retry_after_header=True,
    )


def _next_attempt(
    policy: _RetryPolicy,
    method: str,
    url: str,
    failure: HTTPCallError,
    deadline: float,
    *,
    error: Exception | None = None,
    response: BaseHTTPResponse | None = None,
) -> _RetryPolicy:
    """The policy for the next attempt, after its wait; raises ``failure`` if none is left."""
    try:
        policy = policy.increment(method, path_of(url), response=response, error=error)
    except HTTPError:  # MaxRetryError, or urllib3 re-raising a read error it would not repeat
        raise failure from None
    wait = policy.wait_after(failure)
    if time.monotonic() + wait >= deadline:
        raise failure
    time.sleep(wait)
    return policy


# --- one exchange --------------------------------------------------------------------------


def _exchange(
    method: str,
    url: str,
    body: bytes | None,
    headers: Mapping[str, str],
    deadline: float,
    limits: Limits,
) -> tuple[BaseHTTPResponse, bytes]:
    """One request and its whole answer; a watchdog cuts the connection at the limit."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise HTTPCallError("deadline", "the deadline passed before the request")
    timeout = min(limits.request_timeout, remaining)
    bound_by_deadline = timeout < limits.request_timeout
    bare_url, all_headers = _without_credentials(url, headers)
    response = None
    with _watchdog(timeout) as cut:
        try:
            response = _pool_for(bare_url).urlopen(
                method,
                bare_url,
                body=body,
                headers=all_headers,
                retries=False,  # the caller's loop repeats calls; redirects are its too
                redirect=False,
                timeout=Timeout(connect=timeout, read=timeout),
                preload_content=False,
                decode_content=False,
            )
            raw = _read_capped(response, limits.max_response_bytes)
            if cut.is_set():  # cut short by the watchdog: what arrived is incomplete
                raise TimeoutError
        except HTTPCallError:
            _discard(response)
            raise
        except (HTTPError, HTTPException, OSError, ValueError) as exc:
            _discard(response)
            timed_out = cut.is_set() or _is_timeout(exc)
            raise _failure(exc, timed_out, bound_by_deadline, limits) from exc
    response.release_conn()
    return response, raw


def _is_timeout(exc: BaseException) -> bool:
    # urllib3 files a refused connection under its connect timeouts
    return isinstance(exc, SocketTimeoutError | TimeoutError) and not isinstance(
        exc, NewConnectionError
    )


def _failure(
    exc: BaseException, timed_out: bool, bound_by_deadline: bool, limits: Limits
) -> HTTPCallError:
    if timed_out and bound_by_deadline:
        return HTTPCallError("deadline", "the deadline passed during the request")
    if timed_out:
        return HTTPCallError(
            "timeout", f"took longer than request_timeout={limits.request_timeout:g} s"
        )
    cause = _root_cause(exc)
    return HTTPCallError(
        "transport", f"the connection failed ({type(cause).__name__}: {str(cause)[:200]})"
    )


def _root_cause(exc: BaseException) -> BaseException:
    """What a urllib3 wrapper wraps, e.g. ``ConnectionRefusedError`` in ``NewConnectionError``.

    Messages name the socket's own error, as they did before urllib3 carried the calls.
    """
    while isinstance(exc, HTTPError):
        inner = exc.__cause__ or next((a for a in exc.args if isinstance(a, BaseException)), None)
        if inner is None:
            break
        exc = inner
    return exc


def _discard(response: BaseHTTPResponse | None) -> None:
    """Close a connection whose answer was not read to its end, and hand it back."""
    if response is not None:
        response.close()
        response.release_conn()


def _without_credentials(url: str, headers: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """``url`` without ``user:password@`` and ``headers`` with them as basic auth."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, dict(headers)
    pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    token = base64.b64encode(pair.encode()).decode()
    bare = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return bare, {**headers, "Authorization": f"Basic {token}"}


def _read_capped(response: BaseHTTPResponse, cap: int) -> bytes:
    declared = response.headers.get("Content-Length")
    size_declared = int(declared) if declared and declared.strip().isdigit() else None
    if size_declared is not None and size_declared > cap:
        raise HTTPCallError(
            "answer", f"announced {size_declared} bytes, over max_response_bytes={cap}"
        )
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read(_CHUNK_BYTES):  # a body cut short raises (ProtocolError)
        size += len(chunk)
        if size > cap:
            raise HTTPCallError("answer", f"answered more than max_response_bytes={cap} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _decode(response: BaseHTTPResponse, raw: bytes) -> Any:
    if not 200 <= response.status < 300:
        raise HTTPCallError(
            "status",
            f"HTTP {response.status}",
            status=response.status,
            body=raw[:200],
            retry_after=_retry_after(response.headers.get("Retry-After")),
        )
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        raise HTTPCallError("answer", f"answered malformed JSON: {raw[:200]!r}") from None


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta seconds or an HTTP date), read by urllib3.

    >>> _retry_after("7"), _retry_after("soon")
    (7.0, None)
    """
    if not value:
        return None
    try:
        return float(Retry().parse_retry_after(value))
    except (InvalidHeader, ValueError, OverflowError):  # ValueError: thousands of digits
        return None


# --- redirects -----------------------------------------------------------------------------


def _redirect_target(
    url: str, origin: tuple[str, str, int | None], response: BaseHTTPResponse, redirects: int
) -> str:
    """Where a redirect leads, if it stays within ``origin`` and the redirect limit."""
    target = urllib.parse.urljoin(url, response.headers.get("Location") or "")
    if _origin(target) != origin:
        raise HTTPCallError(
            "redirect",
            f"redirected to another origin ({redact_url(target)}); credentials are not sent there",
            status=response.status,
        )
    if redirects > MAX_REDIRECTS:
        raise HTTPCallError("answer", f"followed more than {MAX_REDIRECTS} redirects")
    return target


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


# --- the watchdog: sockets of the running call, shut at its limit ---------------------------

# How a connection hands its socket to the watchdog of the call running in this thread.
_watch: contextvars.ContextVar[Callable[[socket.socket], None]] = contextvars.ContextVar(
    "_watch", default=lambda sock: None
)


@contextlib.contextmanager
def _watchdog(seconds: float) -> Iterator[threading.Event]:
    """Shuts every socket the call opens or reuses once ``seconds`` have passed.

    Yields the event that says it did (what the call read since is incomplete).
    """
    sockets: list[socket.socket] = []
    fired = threading.Event()
    lock = threading.Lock()  # a socket handed over as the limit passes is cut too

    def watch(sock: socket.socket) -> None:
        with lock:
            sockets.append(sock)
            if fired.is_set():
                _shut(sock)

    def fire() -> None:
        with lock:
            fired.set()
            for sock in sockets:
                _shut(sock)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    token = _watch.set(watch)
    timer.start()
    try:
        yield fired
    finally:
        timer.cancel()
        _watch.reset(token)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed, or detached into a TLS socket
        sock.shutdown(socket.SHUT_RDWR)


class _WatchedHTTPConnection(HTTPConnection):
    """Hands its socket to the running call's watchdog: a new one as soon as it exists
    (before a proxy tunnel or TLS handshake), a pooled one as it is reused."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _watch.get()(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:
            _watch.get()(self.sock)
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(_WatchedHTTPConnection, HTTPSConnection):
    """The TLS counterpart of :class:`_WatchedHTTPConnection`."""


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


# --- pools and proxies ---------------------------------------------------------------------

_pools: dict[tuple[int, str | None], urllib3.PoolManager] = {}
_pools_lock = threading.Lock()


def _pool_for(url: str) -> urllib3.PoolManager:
    """This process's pool manager for ``url``: direct, or through the environment's proxy."""
    proxy = _proxy_for(url)
    key = (os.getpid(), proxy)  # a forked child must not share its parent's connections
    with _pools_lock:
        manager = _pools.get(key)
        if manager is None:
            manager = (
                urllib3.ProxyManager(proxy, maxsize=4) if proxy else urllib3.PoolManager(maxsize=4)
            )
            manager.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}
            _pools[key] = manager
    return manager


def _proxy_for(url: str) -> str | None:
    """The environment's proxy for ``url`` as ``http://host:port`` (none for this machine
    or ``no_proxy`` hosts); reached in plain HTTP, tunnelling ``https`` with ``CONNECT``."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or is_loopback(host) or urllib.request.proxy_bypass(host):
        return None
    proxy_parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return "http://" + proxy_parts.netloc.rpartition("@")[2]

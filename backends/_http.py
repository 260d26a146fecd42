"""Bounded JSON-over-HTTP calls for the cloud adapters (stdlib only).

:func:`call_json` makes one API call and either returns the decoded JSON answer or raises
one :class:`HTTPCallError` saying what went wrong; the adapter words it as its own typed
error. What it guarantees:

* one ``deadline`` (``time.monotonic()`` seconds) bounds every request, retry wait and byte:
  a watchdog shuts the socket at the limit, so a server that drips its answer cannot
  outlast it; each request also has its own ``request_timeout``;
* answers are read in pieces up to ``max_response_bytes`` (an announced larger one is refused
  before reading), and a body cut short is noticed;
* ``retry=True`` (idempotent calls only) repeats a call after a reset, a timeout or HTTP
  429/500/502/503/504, waiting ``backoff * 2**attempt`` seconds capped at ``max_backoff``,
  or longer if ``Retry-After`` asks (still capped), never past the deadline;
* redirects are followed (5 at most) only within the same origin, so headers such as an API
  key never reach another host; ``user:password@`` in the URL becomes basic auth;
* the environment's proxies are used (CONNECT for https), except for this machine.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from bmfdsl.credentials import is_loopback, redact_url

__all__ = ["HTTPCallError", "Limits", "call_json", "path_of"]

TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

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
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.status = status
        self.body = body
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Whether repeating an idempotent call may succeed."""
        if self.kind == "status":
            return self.status in TRANSIENT_STATUSES
        return self.kind in ("transport", "timeout")


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
    """The JSON answer of one call (``{}`` for an empty body); raises :class:`HTTPCallError`."""
    for attempt in range(limits.max_retries + 1):
        try:
            return _follow(method, url, body, headers, deadline, limits)
        except HTTPCallError as failure:
            if not (retry and failure.transient) or attempt == limits.max_retries:
                raise
            wait = min(limits.max_backoff, limits.backoff * 2**attempt)
            if failure.retry_after is not None:
                wait = min(limits.max_backoff, max(wait, failure.retry_after))
            if time.monotonic() + wait >= deadline:
                raise
            time.sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


def path_of(url: str) -> str:
    """The path and query of ``url``, for messages.

    >>> path_of("https://u:p@host/da/v4/jobs?x=1")
    '/da/v4/jobs?x=1'
    """
    parts = urllib.parse.urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _follow(
    method: str,
    url: str,
    body: bytes | None,
    headers: Mapping[str, str],
    deadline: float,
    limits: Limits,
) -> Any:
    origin = _origin(url)
    for _ in range(6):
        status, answer_headers, raw = _exchange(method, url, body, headers, deadline, limits)
        if status not in _REDIRECT_STATUSES:
            return _decode(status, answer_headers, raw)
        target = urllib.parse.urljoin(url, answer_headers.get("Location") or "")
        if _origin(target) != origin:
            raise HTTPCallError(
                "redirect",
                f"redirected to another origin ({redact_url(target)}); credentials are not "
                "sent there",
                status=status,
            )
        url = target
    raise HTTPCallError("answer", "followed more than 5 redirects")


def _exchange(
    method: str,
    url: str,
    body: bytes | None,
    headers: Mapping[str, str],
    deadline: float,
    limits: Limits,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One request and its whole answer; a watchdog cuts the connection at the limit."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise HTTPCallError("deadline", "the deadline passed before the request")
    timeout = min(limits.request_timeout, remaining)
    bound_by_deadline = timeout < limits.request_timeout
    parts = urllib.parse.urlsplit(url)
    connection = _connection(parts, timeout)
    all_headers = dict(headers)
    if parts.username is not None:  # credentials in the URL: basic auth, same origin only
        user, password = parts.username, parts.password or ""
        pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        all_headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    fired = threading.Event()

    def cut() -> None:  # a drip-feeding server cannot outlast the limit
        fired.set()
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(timeout, cut)
    watchdog.daemon = True
    watchdog.start()
    try:
        target = _request_target(parts)
        if parts.scheme == "http" and connection.host != (parts.hostname or ""):
            target = f"http://{parts.netloc.rpartition('@')[2]}{target}"  # via a proxy
        connection.request(method, target, body=body, headers=all_headers)
        response = connection.getresponse()
        raw = _read_capped(response, limits.max_response_bytes)
        if fired.is_set():  # cut short by the watchdog: what arrived is incomplete
            raise TimeoutError
        return response.status, response.headers, raw
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if fired.is_set() or isinstance(exc, TimeoutError):
            if bound_by_deadline:
                raise HTTPCallError("deadline", "the deadline passed during the request") from None
            raise HTTPCallError(
                "timeout", f"took longer than request_timeout={limits.request_timeout:g} s"
            ) from None
        raise HTTPCallError(
            "transport", f"the connection failed ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    finally:
        watchdog.cancel()
        connection.close()


def _decode(status: int, headers: http.client.HTTPMessage, raw: bytes) -> Any:
    if not 200 <= status < 300:
        raise HTTPCallError(
            "status",
            f"HTTP {status}",
            status=status,
            body=raw[:200],
            retry_after=_retry_after(headers.get("Retry-After")),
        )
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        raise HTTPCallError("answer", f"answered malformed JSON: {raw[:200]!r}") from None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def _request_target(parts: urllib.parse.SplitResult) -> str:
    return urllib.parse.quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~") + (
        f"?{parts.query}" if parts.query else ""
    )


def _proxy_for(parts: urllib.parse.SplitResult) -> urllib.parse.SplitResult | None:
    """The environment's proxy for this URL (none for this machine or ``no_proxy`` hosts)."""
    host = parts.hostname or ""
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or is_loopback(host) or urllib.request.proxy_bypass(host):
        return None
    return urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")


def _connection(parts: urllib.parse.SplitResult, timeout: float) -> http.client.HTTPConnection:
    proxy = _proxy_for(parts)
    host, port = parts.hostname or "", parts.port
    if parts.scheme == "https":
        context = ssl.create_default_context()
        if proxy is None:
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        connection = http.client.HTTPSConnection(
            proxy.hostname or "", proxy.port, timeout=timeout, context=context
        )
        connection.set_tunnel(host, port)
        return connection
    if proxy is None:
        return http.client.HTTPConnection(host, port, timeout=timeout)
    return http.client.HTTPConnection(proxy.hostname or "", proxy.port, timeout=timeout)


def _read_capped(response: http.client.HTTPResponse, cap: int) -> bytes:
    declared = response.getheader("Content-Length")
    size_declared = int(declared) if declared and declared.strip().isdigit() else None
    if size_declared is not None and size_declared > cap:
        raise HTTPCallError(
            "answer", f"announced {size_declared} bytes, over max_response_bytes={cap}"
        )
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read1(1 << 16)  # what has arrived: the watchdog can act between
        if not chunk:
            if size_declared is not None and size != size_declared:
                raise http.client.IncompleteRead(b"", size_declared - size)
            return b"".join(chunks)
        size += len(chunk)
        if size > cap:
            raise HTTPCallError("answer", f"answered more than max_response_bytes={cap} bytes")
        chunks.append(chunk)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta seconds or an HTTP date).

    >>> _retry_after("7"), _retry_after("soon")
    (7.0, None)
    """
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())

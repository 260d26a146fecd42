"""Credentials and service URLs: cleaned once, never shown.

Every API key or token passes :func:`clean_credential` before use: surrounding whitespace
(a trailing newline from ``$(cat key.txt)``) is stripped, and control or non-ASCII
characters are refused with an error naming the variable, never the value. Cleaned values
are remembered so :func:`scrub` can blank them out of any text bmfdsl shows or records
(exception messages, tracebacks, JSONL records), together with the values of the
credential environment variables.

>>> key = clean_credential("  abc-123\\n", "EXAMPLE_KEY")
>>> key
'abc-123'
>>> scrub("server said: bad key abc-123")
'server said: bad key ***'
>>> redact_url("https://user:pw@example.com/da")
'https://***@example.com/da'

Text a service sends (error bodies, job messages) passes :func:`service_text` before it
reaches an error, a log or the terminal: credentials scrubbed and control characters escaped,
so that a server can neither forge a line of output nor send terminal escape sequences.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import urllib.parse

from bmfdsl.errors import InvalidCredentialsError, InvalidParameterError

__all__ = [
    "CREDENTIAL_VARIABLES",
    "check_service_url",
    "clean_credential",
    "is_loopback",
    "redact_url",
    "scrub",
    "service_text",
]

CREDENTIAL_VARIABLES: tuple[str, ...] = ("BMFDSL_DA_API_KEY", "DWAVE_API_TOKEN")
"""Environment variables whose values :func:`scrub` always removes."""

_MASK = "***"
_seen: set[str] = set()


def clean_credential(value: object, variable: str) -> str:
    """``value`` without surrounding whitespace; refuses control and non-ASCII characters.

    Args:
        value: the key or token as given.
        variable: where it came from (an environment variable or option name), for messages.

    Raises:
        InvalidCredentialsError: not a string, empty after stripping, or containing a control
            or non-ASCII character, ``"`` or ``\\`` (no issued key has them; a server echoing
            one JSON-escaped would show it in a form :func:`scrub` must guess). The message
            names ``variable`` and never shows the value.
    """
    if not isinstance(value, str):
        raise InvalidCredentialsError(f"{variable} must be a string; got {type(value).__name__}")
    if value.strip():  # remember the raw spelling too: it may be echoed as given
        _seen.add(value)
    cleaned = value.strip()
    if not cleaned:
        raise InvalidCredentialsError(f"{variable} is empty; set it to your key")
    if any(not (" " <= ch <= "~") for ch in cleaned):
        raise InvalidCredentialsError(
            f"{variable} contains a control or non-ASCII character (a pasted line break or "
            "escape?); set it to the key exactly as issued"
        )
    if '"' in cleaned or "\\" in cleaned:
        raise InvalidCredentialsError(
            f"{variable} contains a quote or a backslash (copied with its quoting?); set it "
            "to the key exactly as issued"
        )
    _seen.add(cleaned)
    return cleaned


def scrub(text: str) -> str:
    """``text`` with every known credential replaced by ``***``.

    Known: values passed through :func:`clean_credential` in this process and the values of
    :data:`CREDENTIAL_VARIABLES` in the environment (raw and stripped). Each is also removed
    as a server may echo it: JSON-escaped, URL-encoded and as ``repr`` shows it.

    >>> _ = clean_credential("k/ey+1", "EXAMPLE_KEY")
    >>> scrub("sent k%2Fey%2B1 and k/ey%2B1")
    'sent *** and ***'
    """
    secrets = set(_seen)
    for variable in CREDENTIAL_VARIABLES:
        raw = os.environ.get(variable)
        if raw and raw.strip():
            secrets.update({raw, raw.strip()})
    spellings = {form for secret in secrets for form in _echoed_forms(secret)}
    for spelling in sorted(spellings, key=len, reverse=True):  # longest first: no partial leaks
        text = text.replace(spelling, _MASK)
    return text


def _echoed_forms(secret: str) -> set[str]:
    """``secret`` as given and as a server or a traceback may echo it."""
    return {
        secret,
        secret.encode("unicode_escape").decode("ascii"),  # as repr() prints it, e.g. 'key\\n'
        json.dumps(secret, ensure_ascii=True)[1:-1],  # inside a JSON string
        urllib.parse.quote(secret, safe=""),  # URL-encoded (a path or query echoed back)
        urllib.parse.quote_plus(secret, safe=""),
        urllib.parse.quote(secret),  # with "/" left as is
    }


# C0 and C1 control characters and DEL (an ANSI escape starts with ESC or the C1 CSI), the
# Unicode line separators and the bidirectional overrides (they reorder what a terminal shows)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def service_text(text: object) -> str:
    """``text`` from a service made safe to show: credentials scrubbed (:func:`scrub`) and
    every control character escaped (``\\n``, ``\\r``, ``\\x1b``...), so a server can neither
    forge a line of output nor send terminal escape sequences.

    >>> service_text("bad\\r\\nbmfdsl: all good\\x1b[2J")
    'bad\\\\r\\\\nbmfdsl: all good\\\\x1b[2J'
    """
    return _CONTROL.sub(_escape_control, scrub(str(text)))


def _escape_control(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` part replaced by ``***@``."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{_MASK}@{host}"))


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` is this machine (``localhost``, 127.0.0.0/8, ``::1``).

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("example.com")
    (True, True, False)
    """
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_service_url(url: object, *, variable: str, allow_http: bool = False) -> str:
    """Return ``url`` (trailing ``/`` removed) if credentials may be sent to it.

    Only ``https`` is accepted, and ``http`` on a loopback host (a local test server) or
    with ``allow_http=True`` (a trusted test rig).

    Raises:
        InvalidParameterError: another scheme, no host, or ``http`` to a remote host.

    >>> check_service_url("http://127.0.0.1:8080/", variable="url")
    'http://127.0.0.1:8080'
    """
    if not isinstance(url, str):
        raise InvalidParameterError(f"{variable} must be a URL string; got {type(url).__name__}")
    text = url.strip().rstrip("/")
    shown = redact_url(text)
    try:
        parts = urllib.parse.urlsplit(text)
        host = parts.hostname
        parts.port  # noqa: B018 - a bad port raises ValueError here
    except ValueError:
        raise InvalidParameterError(f"{variable} is not a valid URL: {shown!r}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidParameterError(
            f"{variable} must be an https:// URL with a host; got {shown!r}"
        )
    if any(ch.isspace() or ord(ch) < 32 for ch in text):
        raise InvalidParameterError(f"{variable} contains whitespace or control characters")
    if parts.scheme == "http" and not (allow_http or is_loopback(host)):
        raise InvalidParameterError(
            f"{variable} {shown!r} is plain http to a remote host: the key would travel in "
            "clear. Use https://, or pass allow_http=True for a trusted test rig"
        )
    return text

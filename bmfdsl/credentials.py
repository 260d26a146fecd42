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
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse

from bmfdsl.errors import InvalidCredentialsError, InvalidParameterError

__all__ = [
    "CREDENTIAL_VARIABLES",
    "check_service_url",
    "clean_credential",
    "is_loopback",
    "redact_url",
    "scrub",
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
            or non-ASCII character. The message names ``variable`` and never shows the value.
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
    _seen.add(cleaned)
    return cleaned


def scrub(text: str) -> str:
    """``text`` with every known credential replaced by ``***``.

    Known: values passed through :func:`clean_credential` in this process and the values of
    :data:`CREDENTIAL_VARIABLES` in the environment (raw and stripped).
    """
    secrets = set(_seen)
    for variable in CREDENTIAL_VARIABLES:
        raw = os.environ.get(variable)
        if raw and raw.strip():
            secrets.update({raw, raw.strip()})
    for secret in sorted(secrets, key=len, reverse=True):  # longest first: no partial leaks
        text = text.replace(secret, _MASK)
        escaped = secret.encode("unicode_escape").decode("ascii")
        if escaped != secret:  # as repr() would print it, e.g. 'key\\n'
            text = text.replace(escaped, _MASK)
    return text


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

"""Credentials: cleaned once, refused by variable name, scrubbed from every text we show."""

from __future__ import annotations

import pytest

from bmfdsl.apps import _cli as cli
from bmfdsl.apps._cli import EXIT_DATA_ERROR
from bmfdsl.apps.experiments import run_experiment
from bmfdsl.credentials import check_service_url, clean_credential, is_loopback, redact_url, scrub
from bmfdsl.errors import BmfdslError, InvalidCredentialsError, InvalidParameterError


def test_clean_credential_strips_and_remembers_the_key():
    assert clean_credential("\t key-one-41 \r\n", "SOME_KEY") == "key-one-41"
    scrubbed = scrub("echo: key-one-41 and '\\t key-one-41 \\r\\n'")
    assert "key-one-41" not in scrubbed and scrubbed.startswith("echo: *** and '***")


@pytest.mark.parametrize("value", ["a\nb-secretish", "a\x7fb-secretish", "ab-secretish\u200b", ""])
def test_malformed_credentials_name_the_variable_never_the_value(value):
    with pytest.raises(InvalidCredentialsError, match="SOME_KEY") as caught:
        clean_credential(value, "SOME_KEY")
    assert "secretish" not in str(caught.value)
    assert isinstance(caught.value, BmfdslError) and isinstance(caught.value, ValueError)


def test_scrub_covers_the_credential_variables_of_the_environment(monkeypatch):
    monkeypatch.setenv("DWAVE_API_TOKEN", "DEV-env-token-5\n")
    assert scrub("token DEV-env-token-5 refused") == "token *** refused"
    assert scrub("nothing secret here") == "nothing secret here"


def test_redact_url_hides_user_and_password_only():
    assert redact_url("https://u:p@host:8443/da?x=1") == "https://***@host:8443/da?x=1"
    assert redact_url("https://host/da") == "https://host/da"


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://example.com/da/", True),
        ("http://127.0.0.1:8000", True),
        ("http://[::1]:8000", True),
        ("http://localhost", True),
        ("http://example.com", False),
        ("file:///etc/passwd", False),
        ("gopher://example.com", False),
        ("https://exa mple.com", False),
        ("https://example.com:99999", False),
    ],
)
def test_service_urls_must_be_https_or_loopback(url, allowed):
    if allowed:
        assert check_service_url(url, variable="url") == url.rstrip("/")
    else:
        with pytest.raises(InvalidParameterError, match="url"):
            check_service_url(url, variable="url")


def test_is_loopback_is_not_fooled_by_names():
    assert not is_loopback("127.0.0.1.example.com")
    assert is_loopback("127.8.9.10")


def test_the_cli_never_echoes_a_key_with_a_trailing_newline(tmp_path, monkeypatch, capsys):
    (tmp_path / "a.csv").write_text("1,0\n0,1\n")
    monkeypatch.setenv("BMFDSL_DA_API_KEY", "secret-abc-cli\n")
    monkeypatch.setenv("BMFDSL_DA_URL", "http://127.0.0.1:9")
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    argv = [
        "factorize",
        str(tmp_path / "a.csv"),
        "-r",
        "1",
        "--backend",
        "fujitsu-da",
        "--out",
        str(tmp_path / "o"),
    ]
    assert cli.main(argv) == EXIT_DATA_ERROR
    stderr = capsys.readouterr().err
    assert stderr.startswith("bmfdsl: error:") and "Digital Annealer" in stderr
    assert "secret-abc-cli" not in stderr


def test_the_cli_refuses_a_key_with_a_control_character_by_name(tmp_path, monkeypatch, capsys):
    (tmp_path / "a.csv").write_text("1,0\n0,1\n")
    monkeypatch.setenv("BMFDSL_DA_API_KEY", "secret\x1bcli-key")
    argv = ["factorize", str(tmp_path / "a.csv"), "-r", "1", "--backend", "fujitsu-da"]
    assert cli.main([*argv, "--out", str(tmp_path / "o")]) == EXIT_DATA_ERROR
    stderr = capsys.readouterr().err
    assert "BMFDSL_DA_API_KEY" in stderr and "cli-key" not in stderr


def test_a_failed_run_records_no_credential(tmp_path, monkeypatch):
    monkeypatch.setenv("BMFDSL_DA_API_KEY", "secret-in-record-9")

    def leaky(A, rank, settings):
        raise RuntimeError("service said: Invalid header value b'secret-in-record-9\\n'")

    run_experiment(
        "table1",
        tmp_path,
        sizes=[30],
        ranks=[1],
        trials=1,
        methods=["leaky"],
        method_table={"leaky": leaky},
        workers=1,
        progress=False,
    )
    text = (tmp_path / "table1.jsonl").read_text()
    assert "RuntimeError" in text and "***" in text
    assert "secret-in-record-9" not in text


@pytest.mark.parametrize(
    ("key", "expected"),
    [("secret-run-key\n", "ConnectionRefusedError"), ("secret-run\x1bkey", "BMFDSL_DA_API_KEY")],
)
def test_a_fujitsu_run_records_why_it_failed_without_the_key(tmp_path, monkeypatch, key, expected):
    monkeypatch.setenv("BMFDSL_DA_API_KEY", key)
    monkeypatch.setenv("BMFDSL_DA_URL", "http://127.0.0.1:9")  # nothing listens there
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    records = run_experiment(
        "table1",
        tmp_path,
        sizes=[30],
        ranks=[1],
        trials=1,
        methods=["qubo:fujitsu-da"],
        workers=1,
        progress=False,
    )
    assert records == []
    text = (tmp_path / "table1.jsonl").read_text()
    assert '"status": "failed"' in text and expected in text
    assert "secret-run" not in text


# --- issue 24: a key echoed in another spelling; service text that forges output ----------


@pytest.mark.parametrize("key", ['sec"ret-key-24', "sec\\ret-key-24"])
def test_item9_a_key_with_a_quote_or_backslash_is_refused_by_name(key):
    with pytest.raises(InvalidCredentialsError, match="SOME_KEY") as caught:
        clean_credential(key, "SOME_KEY")
    assert "ret-key-24" not in str(caught.value)


def test_item9_a_key_echoed_json_escaped_or_url_encoded_is_scrubbed(monkeypatch):
    import json
    import urllib.parse

    key = 'env"key/with+odd\\chars-24'  # from the environment: scrubbed even though refused
    monkeypatch.setenv("BMFDSL_DA_API_KEY", key)
    echoes = [
        json.dumps({"message": f"bad key {key}"}),
        urllib.parse.quote(key, safe=""),
        urllib.parse.quote_plus(key),
        f"GET /jobs?key={urllib.parse.quote(key)}",
        repr(key),
    ]
    for echo in echoes:
        shown = scrub(echo)
        assert "odd" not in shown and "***" in shown, echo


def test_item8_service_text_escapes_control_characters():
    from bmfdsl.credentials import service_text

    forged = "oops\r\nbmfdsl: all good, exit 0\x1b[2J\x9b31m\x00\u202e\u2028"
    shown = service_text(forged)
    assert shown.isprintable() and "\n" not in shown and "\x1b" not in shown
    assert "\\r\\nbmfdsl: all good" in shown and "\\x1b[2J" in shown
    assert service_text("plain words stay") == "plain words stay"

"""Every ``cebroker serve`` setting from its one declaration (cebroker.settings): the flag and the
``CEBROKER_*`` variable each set it, a bad value of either is a usage error (exit 2) naming the
flag or the variable and the value, ``--help`` and the README list them all."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from cebroker.cli import SERVE_OPTIONS, build_parser, settings_from_args
from cebroker.options import Option
from cebroker.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = {option.name: option for option in SERVE_OPTIONS}

#: One value per setting, as text, and what it must become.
GOOD: dict[str, tuple[str, Any]] = {
    "host": ("0.0.0.0", "0.0.0.0"),
    "port": ("9000", 9000),
    "db": ("/var/lib/cebroker/b.db", "/var/lib/cebroker/b.db"),
    "log_level": ("DEBUG", "debug"),
    "log_format": ("JSON", "json"),
    "access_log": ("on", True),
    "loop": ("asyncio", "asyncio"),
    "http": ("h11", "h11"),
    "base_url": ("https://broker.example/api/", "https://broker.example/api/"),
    "max_subscription_body": ("4KiB", 4096),
    "max_event_size": ("2000", 2000),
    "max_batch_size": ("1MB", 1_000_000),
    "max_header_size": ("64KiB", 65536),
    "max_header_count": ("50", 50),
    "max_url_length": ("4KiB", 4096),
    "header_timeout": ("30s", 30.0),
    "dedup_window": ("1h30m", 5400.0),
    "max_backlog": ("5", 5),
    "probe_max_delay": ("1m30s", 90.0),
    "reply_max_hops": ("3", 3),
    "broker_events": ("on", True),
    "reply_max_wait": ("1m", 60.0),
    "retention": ("7d", 604800.0),
    "retention_bytes": ("1GiB", 1024**3),
    "max_replays_per_subscription": ("3", 3),
    "max_replays_per_tenant": ("20", 20),
    "webhook_validation": ("off", False),
    "event_validation": ("Enforce", "enforce"),
    "registry_document_schema": ("schema.json", Path("schema.json")),
    "sources": ("nats://127.0.0.1:4222/events", ("nats://127.0.0.1:4222/events",)),
    "instance_lease": ("3s", 3.0),
    "shutdown_grace": ("30s", 30.0),
    "api_keys": ("schema.json", Path("schema.json")),
    "oidc_issuer": ("https://login.example/realms/a", "https://login.example/realms/a"),
    "oidc_audience": ("cebroker", "cebroker"),
    "oidc_tenant_claim": ("org", "org"),
    "metrics_public": ("on", True),
    "insecure_no_auth": ("yes", True),
    "max_subscriptions_per_tenant": ("100", 100),
    "tenant_policies": ("schema.json", Path("schema.json")),
    "allow_sink_networks": ("10.20.0.0/16, fd00:1::/64", ("10.20.0.0/16", "fd00:1::/64")),
    "webhook_secret_overlap": ("1h", 3600.0),
    "secrets_key": ("schema.json", Path("schema.json")),
    "tls_cert": ("schema.json", Path("schema.json")),
    "tls_key": ("schema.json", Path("schema.json")),
    "otel_exporter_otlp_endpoint": ("http://collector:4318", "http://collector:4318"),
    "otel_exporter_otlp_protocol": ("http/protobuf", "http/protobuf"),
    "otel_exporter_otlp_headers": ("api-key=s3cret,x-team=a", "api-key=s3cret,x-team=a"),
    "otel_service_name": ("broker-eu", "broker-eu"),
    "otel_resource_attributes": ("deployment.environment=prod", "deployment.environment=prod"),
    "otel_traces_sampler": ("parentbased_traceidratio", "parentbased_traceidratio"),
    "otel_traces_sampler_arg": ("0.25", 0.25),
}

#: Values of the wrong type, out of range or not among the choices; the empty value is bad for all.
BAD: dict[str, tuple[str, ...]] = {
    "host": (" ",),
    "port": ("http", "70000", "-1", "8080.5"),
    "db": (" ", "postgresql:///cebroker", "postgresql://h:port/db", "postgres://h:0/db"),
    "log_level": ("chatty",),
    "log_format": ("logfmt",),
    "access_log": ("sometimes",),
    "loop": ("trio",),
    "http": ("h2",),
    "base_url": ("localhost:8080", "ftp://broker.example/"),
    "max_subscription_body": ("0", "-5", "1k", "lots"),
    "max_event_size": ("-5", "0", "1e6"),
    "max_batch_size": ("1.5", "10 MiBs", "0.5B"),
    "max_header_size": ("1000", "-1", "lots"),
    "max_header_count": ("0", "10001", "many"),
    "max_url_length": ("100", "0", "long"),
    "header_timeout": ("0", "-1s", "inf", "slow"),
    "dedup_window": ("-1", "nan", "inf", "10 minutes"),
    "max_backlog": ("0", "lots", "1e6"),
    "probe_max_delay": ("0", "0s", "-1", "inf", "ten seconds"),
    "reply_max_hops": ("0", "1001", "-1", "eight"),
    "broker_events": ("maybe", "2"),
    "reply_max_wait": ("0", "-1s", "soon"),
    "retention": ("-1s", "forever", "inf"),
    "retention_bytes": ("0", "-1", "lots"),
    "max_replays_per_subscription": ("0", "-1", "two"),
    "max_replays_per_tenant": ("0", "many"),
    "webhook_validation": ("maybe", "enabled", "2"),
    "event_validation": ("strict",),
    "registry_document_schema": ("no-such-schema.json",),
    "sources": ("ftp://127.0.0.1/x", "mqtt://127.0.0.1:1883"),
    "instance_lease": ("0", "-1s", "0.5s", "forever"),
    "shutdown_grace": ("-1s", "a while", "inf"),
    "api_keys": ("no-such-keys.json",),
    "oidc_issuer": ("http://login.example/", "login.example", "ftp://127.0.0.1/"),
    "oidc_audience": (" ",),
    "oidc_tenant_claim": (" ",),
    "metrics_public": ("public",),
    "insecure_no_auth": ("please",),
    "max_subscriptions_per_tenant": ("0", "many"),
    "tenant_policies": ("no-such-policies.json",),
    "allow_sink_networks": ("10.0.0.1/8", "10.0.0.0/33,fd00::/8", "intranet"),
    "webhook_secret_overlap": ("-1s", "a day"),
    "secrets_key": ("no-such-key",),
    "tls_cert": ("no-such-cert.pem",),
    "tls_key": ("no-such-key.pem",),
    "otel_exporter_otlp_endpoint": ("collector:4318", "grpc://collector:4317"),
    "otel_exporter_otlp_protocol": ("grpc", "http/json"),
    "otel_exporter_otlp_headers": ("api-key", "a b"),
    "otel_service_name": (" ",),
    "otel_resource_attributes": (" ",),
    "otel_traces_sampler": ("sometimes", "jaeger_remote"),
    "otel_traces_sampler_arg": ("1.5", "-0.1", "half"),
}

BAD_CASES = [(name, value) for name, values in BAD.items() for value in ("", *values)]


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No CEBROKER_* variable from outside, and a working directory holding ``schema.json``."""
    for variable in [name for name in os.environ if name.startswith("CEBROKER_")]:
        monkeypatch.delenv(variable)
    (tmp_path / "schema.json").write_text("{}", encoding="utf-8")
    monkeypatch.chdir(tmp_path)


def serve(*flags: str) -> Settings:
    return settings_from_args(build_parser().parse_args(["serve", *flags]))


def refused(capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    """The usage error printed for ``cebroker serve FLAGS`` (which must exit with status 2)."""
    with pytest.raises(SystemExit) as exited:
        serve(*flags)
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_the_tables_cover_every_setting() -> None:
    """Adding a setting without adding it here fails, so every setting is tested both ways."""
    assert set(GOOD) == set(OPTIONS) == set(BAD)
    assert [option.name for option in SERVE_OPTIONS] == list(Settings.__dataclass_fields__)


def test_defaults() -> None:
    assert serve() == Settings()
    defaults = Settings()
    assert (defaults.host, defaults.port, defaults.db) == ("127.0.0.1", 8080, "cebroker.db")
    assert (defaults.max_subscription_body, defaults.max_event_size) == (65536, 1048576)
    assert (defaults.max_batch_size, defaults.dedup_window, defaults.max_backlog) == (
        16777216,
        600.0,
        1000000,
    )
    assert (defaults.webhook_validation, defaults.event_validation) == (True, "off")
    assert (defaults.base_url, defaults.registry_document_schema, defaults.sources) == (None, None, ())


@pytest.mark.parametrize("name", GOOD)
def test_the_flag_sets_it(name: str) -> None:
    text, value = GOOD[name]
    option = OPTIONS[name]
    settings = serve(f"{option.flag}={text}")
    assert getattr(settings, name) == value
    assert settings == Settings(**{name: value})  # and nothing else changed


@pytest.mark.parametrize("name", GOOD)
def test_the_variable_sets_it(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text, value = GOOD[name]
    option = OPTIONS[name]
    assert option.variable is not None
    monkeypatch.setenv(option.variable, text)
    settings = serve()
    assert getattr(settings, name) == value
    assert settings == Settings(**{name: value})


@pytest.mark.parametrize("name", GOOD)
def test_the_flag_wins_over_the_variable(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text, value = GOOD[name]
    option = OPTIONS[name]
    assert option.variable is not None
    monkeypatch.setenv(option.variable, BAD[name][0])
    # A bad variable is not even read when the flag is given: the flag is the whole answer.
    assert getattr(serve(f"{option.flag}={text}"), name) == value


@pytest.mark.parametrize(("name", "value"), BAD_CASES, ids=[f"{n}={v!r}" for n, v in BAD_CASES])
def test_a_bad_flag_is_a_usage_error_naming_it(
    name: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    option = OPTIONS[name]
    err = refused(capsys, f"{option.flag}={value}")
    assert f"cebroker serve: error: argument {option.flag}: invalid value {value!r}: " in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("name", "value"), BAD_CASES, ids=[f"{n}={v!r}" for n, v in BAD_CASES])
def test_a_bad_variable_is_a_usage_error_naming_it(
    name: str, value: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    option = OPTIONS[name]
    assert option.variable is not None
    monkeypatch.setenv(option.variable, value)
    err = refused(capsys)
    assert f"cebroker serve: error: environment variable {option.variable}: invalid value {value!r}: " in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "on"),
    [("true", True), ("TRUE", True), ("yes", True), ("1", True), ("on", True)]
    + [("false", False), ("No", False), ("0", False), ("off", False)],
)
def test_webhook_validation_spellings_are_never_inverted(
    text: str, on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CEBROKER_WEBHOOK_VALIDATION=true`` turned the handshake off before: it must turn it on."""
    monkeypatch.setenv("CEBROKER_WEBHOOK_VALIDATION", text)
    assert serve().webhook_validation is on
    monkeypatch.delenv("CEBROKER_WEBHOOK_VALIDATION")
    assert serve(f"--webhook-validation={text}").webhook_validation is on


def test_a_switch_alone_turns_it_on() -> None:
    assert serve("--insecure-no-auth").insecure_no_auth is True
    assert serve("--metrics-public", "--port", "9000").metrics_public is True
    assert serve("--metrics-public", "off").metrics_public is False


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--host", "0.0.0.0"], "--host 0.0.0.0 is not a loopback address and no authentication"),
        (["--host", "192.0.2.7"], "give --insecure-no-auth to accept that"),
        (["--oidc-issuer", "https://id.example"], "--oidc-issuer and --oidc-audience are given together"),
        (["--tls-cert", "schema.json"], "--tls-cert and --tls-key are given together"),
    ],
)
def test_settings_that_must_not_serve(flags: list[str], reason: str) -> None:
    assert any(reason in problem for problem in serve(*flags).serving_problems())


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--host", "localhost"],
        ["--host", "::1"],
        ["--host", "0.0.0.0", "--insecure-no-auth"],
        ["--host", "0.0.0.0", "--api-keys", "schema.json"],
        ["--host", "0.0.0.0", "--oidc-issuer", "https://id.example", "--oidc-audience", "b"],
    ],
)
def test_settings_that_may_serve(flags: list[str]) -> None:
    assert serve(*flags).serving_problems() == []


def test_sources_variable_takes_several() -> None:
    option = OPTIONS["sources"]
    assert option.variable == "CEBROKER_SOURCES"
    assert serve("--source", "nats://h:4222/a", "--source", "mqtt://h/b/#").sources == (
        "nats://h:4222/a",
        "mqtt://h/b/#",
    )


def test_settings_built_in_code_are_checked_too() -> None:
    with pytest.raises(ValueError, match="setting port=70000: must be between 0 and 65535"):
        Settings(port=70000)
    with pytest.raises(ValueError, match="setting event_validation='strict'"):
        Settings(event_validation="strict")
    with pytest.raises(ValueError, match="setting dedup_window=-1"):
        Settings(dedup_window=-1.0)


def test_help_lists_every_flag_with_its_variable_and_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for option in SERVE_OPTIONS:
        # A switch may be given alone (``--metrics-public``), so its value shows as optional.
        shown = f"[{option.placeholder}]" if option.kind.metavar == "on|off" else option.placeholder
        assert f"{option.flag} {shown} " in text
        assert f"[{option.variable}] (default: {option.shown_default})" in text
    assert "(default: 127.0.0.1)" in text
    assert "(default: cebroker.db)" in text
    assert "(default: 64KiB)" in text


def _settings_rows(markdown: str) -> list[tuple[str, str, str]]:
    """(flag, variable, default) of each table row naming a CEBROKER_ variable."""
    rows = []
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) < 3 or "CEBROKER_" not in cells[1]:
            continue
        flag = re.search(r"--[a-z-]+", cells[0])
        variable = re.search(r"CEBROKER_[A-Z_]+", cells[1])
        assert flag is not None, line
        assert variable is not None, line
        rows.append((flag.group(), variable.group(), cells[2].strip("`")))
    return rows


def _declared(option: Option[Any]) -> tuple[str, str, str]:
    return (option.flag, option.variable or "", option.shown_default)


def test_the_readme_lists_every_setting_with_its_variable_and_default() -> None:
    rows = _settings_rows((ROOT / "README.md").read_text(encoding="utf-8"))
    assert sorted(rows) == sorted(_declared(option) for option in SERVE_OPTIONS), (
        "the README's settings table must have one row per setting:\n"
        + "\n".join(f"| `{f}` | `{v}` | `{d}` |" for f, v, d in map(_declared, SERVE_OPTIONS))
    )


@pytest.mark.parametrize("doc", sorted((ROOT / "docs").glob("*.md")), ids=lambda path: path.name)
def test_settings_tables_in_the_docs_agree_with_the_declaration(doc: Path) -> None:
    declared = {_declared(option) for option in SERVE_OPTIONS}
    for row in _settings_rows(doc.read_text(encoding="utf-8")):
        assert row in declared, f"{doc.name}: {row} does not match the declared setting"


def test_registry_sync_target_comes_from_the_same_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``registry sync --to`` falls back on CEBROKER_BASE_URL, checked like serve's --base-url."""
    sync = ["registry", "sync", "--from", "http://127.0.0.1:8081"]
    assert build_parser().parse_args(sync).target == "http://127.0.0.1:8080"
    monkeypatch.setenv("CEBROKER_BASE_URL", "https://broker.example")
    assert build_parser().parse_args(sync).target == "https://broker.example"
    assert build_parser().parse_args([*sync, "--to", "http://b:1"]).target == "http://b:1"
    for value in ("", "broker.example"):
        monkeypatch.setenv("CEBROKER_BASE_URL", value)
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args(sync)
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert f"registry sync: error: environment variable CEBROKER_BASE_URL: invalid value {value!r}" in err


@pytest.mark.parametrize(
    ("flags", "attribute", "value"),
    [
        (["registry", "sync", "--from", "http://a", "--timeout", "500ms"], "timeout", 0.5),
        (["spark-feed", "--rate", "10", "--url", "http://a", "--duration", "10m"], "duration", 600.0),
        (["spark-feed", "--rate", "10", "--url", "http://a", "--batch-size", "7"], "batch_size", 7),
    ],
)
def test_other_commands_durations_and_counts(flags: list[str], attribute: str, value: object) -> None:
    assert getattr(build_parser().parse_args(flags), attribute) == value


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["registry", "sync", "--from", "http://a", "--timeout=-1"], "--timeout"),
        (["registry", "sync", "--from", "http://a", "--timeout", "0"], "--timeout"),
        (["spark-feed", "--rate", "0", "--url", "http://a"], "--rate"),
        (["spark-feed", "--rate", "10", "--url", "http://a", "--duration", "nan"], "--duration"),
        (["spark-feed", "--rate", "10", "--url", "http://a", "--batch-size", "x"], "--batch-size"),
    ],
)
def test_other_commands_refuse_bad_values(
    flags: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(flags)
    assert exited.value.code == 2
    assert f"error: argument {flag}: invalid value" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["postgresql://broker:pw@db.example:5432/cebroker", "postgres://u@h/d"])
def test_db_takes_a_postgres_url(url: str) -> None:
    assert serve("--db", url).db == url


def test_a_bad_database_url_never_shows_its_password(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    message = refused(capsys, "--db", "postgresql://broker:hunter2@db.example:port/cebroker")
    assert "hunter2" not in message
    assert "broker:***@db.example" in message
    monkeypatch.setenv("CEBROKER_DB", "postgresql://broker:hunter2@:0/cebroker")
    message = refused(capsys)
    assert "hunter2" not in message
    with pytest.raises(ValueError, match=r"\*\*\*") as info:
        Settings(db="postgresql://broker:hunter2@db.example:0/cebroker")
    assert "hunter2" not in str(info.value)

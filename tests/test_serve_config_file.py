"""``cebroker serve --config FILE`` (or ``CEBROKER_CONFIG``): every declared setting under its name
in a TOML file, with the precedence flag > variable > file > default; every kind of value, as
text and in its native TOML type; an unknown key, a value of the wrong type or a refused value is
a usage error (exit 2) naming the file, the key and the reason; ``--print-config`` shows the
effective settings, without secrets, as a file that reads back to the same settings."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from test_serve_settings import BAD, GOOD

from cebroker.cli import SERVE_OPTIONS, build_parser, settings_from_args
from cebroker.settings import Settings

KINDS = {type(option.kind).__name__ for option in SERVE_OPTIONS}
FLAGS = {option.name: option.flag for option in SERVE_OPTIONS}


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No CEBROKER_* variable from outside, and a working directory holding ``schema.json``."""
    for variable in [name for name in os.environ if name.startswith("CEBROKER_")]:
        monkeypatch.delenv(variable)
    (tmp_path / "schema.json").write_text("{}", encoding="utf-8")
    monkeypatch.chdir(tmp_path)


def toml_string(text: str) -> str:
    return json.dumps(text)  # JSON's string escapes are TOML's basic string escapes


def write(tmp_path: Path, body: str, name: str = "cebroker.toml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def serve(*flags: str) -> Settings:
    return settings_from_args(build_parser().parse_args(["serve", *flags]))


def refused(capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    with pytest.raises(SystemExit) as exited:
        serve(*flags)
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(GOOD))
def test_every_setting_is_read_from_the_file_as_its_flag_reads_it(name: str, tmp_path: Path) -> None:
    text, expected = GOOD[name]
    path = write(tmp_path, f"{name} = {toml_string(text)}\n")
    settings = serve("--config", str(path))
    assert getattr(settings, name) == expected
    assert settings == serve(FLAGS[name], text)


def test_the_flag_of_every_setting_agrees_with_the_file(tmp_path: Path) -> None:
    """One file holding every setting gives what the flags give."""
    body = "".join(f"{name} = {toml_string(text)}\n" for name, (text, _) in GOOD.items())
    from_file = serve("--config", str(write(tmp_path, body)))
    flags = [item for option in SERVE_OPTIONS for item in (option.flag, GOOD[option.name][0])]
    assert from_file == serve(*flags)
    assert {name: getattr(from_file, name) for name in GOOD} == {
        name: value for name, (_, value) in GOOD.items()
    }


#: Native TOML values for every kind of setting, and what they become.
NATIVE: dict[str, tuple[str, Any]] = {
    "port": ("9000", 9000),  # Integer
    "max_event_size": ("2048", 2048),  # Size, in bytes
    "dedup_window": ("90", 90.0),  # Duration, in seconds
    "probe_max_delay": ("0.5", 0.5),
    "access_log": ("true", True),  # Boolean
    "webhook_validation": ("false", False),
    "sources": (  # Many
        '["nats://127.0.0.1:4222/events", "mqtt://127.0.0.1:1883/t/#"]',
        ("nats://127.0.0.1:4222/events", "mqtt://127.0.0.1:1883/t/#"),
    ),
    "allow_sink_networks": ('["10.20.0.0/16", "fd00:1::/64"]', ("10.20.0.0/16", "fd00:1::/64")),  # Networks
    "host": ('"0.0.0.0"', "0.0.0.0"),  # Text
    "log_level": ('"DEBUG"', "debug"),  # Choice
    "base_url": ('"https://broker.example/"', "https://broker.example/"),  # HttpUrl
    "db": ('"postgresql://u:p@db.example:5432/c"', "postgresql://u:p@db.example:5432/c"),  # Database
    "api_keys": ('"schema.json"', Path("schema.json")),  # FilePath
    "oidc_issuer": ('"https://login.example/r"', "https://login.example/r"),  # IssuerUrl
    "otel_exporter_otlp_headers": ('"api-key=s3cret,x-team=ops"', "api-key=s3cret,x-team=ops"),  # SecretPairs
    "otel_traces_sampler_arg": ("0.25", 0.25),  # Ratio
}


def test_native_values_cover_every_kind() -> None:
    """A new kind of setting needs a case here."""
    assert {type(option.kind).__name__ for option in SERVE_OPTIONS if option.name in NATIVE} == KINDS


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_native_toml_values(name: str, tmp_path: Path) -> None:
    body, expected = NATIVE[name]
    settings = serve("--config", str(write(tmp_path, f"{name} = {body}\n")))
    assert getattr(settings, name) == expected


BAD_NATIVE: dict[str, tuple[str, str]] = {
    "port": ("true", "must be a whole number, not a boolean"),
    "max_backlog": ("1.5", "must be a whole number, not a fractional number"),
    "max_event_size": ("0", "must be at least 1 byte"),
    "retention": ("-1", "must be a finite duration, not negative"),
    "access_log": ("1", "must be true or false, not a number"),
    "host": ("8080", "must be a string, not a number"),
    "sources": ("[1, 2]", "an array here holds strings only"),
    "allow_sink_networks": ('["10.0.0.1/8"]', "'10.0.0.1/8' is not a network in CIDR notation"),
    "log_level": ('["info"]', "must be a string, not an array"),
    "db": ("{ path = 'x.db' }", "must be a string, not a dict"),
    "instance_lease": ("1979-05-27", "must be a duration (seconds, or a string with a unit), not a date"),
}


@pytest.mark.parametrize("name", sorted(BAD_NATIVE))
def test_a_native_value_of_the_wrong_type_or_range_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body, reason = BAD_NATIVE[name]
    path = write(tmp_path, f"{name} = {body}\n")
    err = refused(capsys, "--config", str(path))
    assert f"configuration file {path}: key {name!r}: {reason}" in err


BAD_TEXT = [(name, value) for name, values in BAD.items() for value in ("", *values)]


@pytest.mark.parametrize(("name", "value"), BAD_TEXT)
def test_every_refused_value_is_refused_in_the_file_with_the_flags_reason(
    name: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flag_error = refused(capsys, f"{FLAGS[name]}={value}")
    reason = flag_error.rsplit(": ", 1)[-1].strip()
    path = write(tmp_path, f"{name} = {toml_string(value)}\n")
    err = refused(capsys, "--config", str(path))
    assert f"configuration file {path}: key {name!r}: " in err
    assert err.strip().endswith(reason), (err, flag_error)
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("body", "key", "reason"),
    [
        ("max_event_sise = 10\n", "max_event_sise", "no such setting"),
        ("[server]\nport = 1\n", "server", "no such setting"),
        ("config = 'other.toml'\n", "config", "no such setting"),
        ("secrets_key_file = 'schema.json'\n", "secrets_key_file", "no such setting"),
    ],
)
def test_an_unknown_key_is_refused(
    body: str, key: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, body)
    err = refused(capsys, "--config", str(path))
    assert f"configuration file {path}: key {key!r}: {reason}" in err


def test_a_file_that_is_missing_or_not_toml_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.toml"
    assert f"configuration file {missing}: cannot read it: No such file or directory" in refused(
        capsys, "--config", str(missing)
    )
    broken = write(tmp_path, "port = \n")
    assert f"configuration file {broken}: not valid TOML: " in refused(capsys, "--config", str(broken))
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"port = \xff\n")
    assert f"configuration file {binary}: not UTF-8 text" in refused(capsys, "--config", str(binary))


def test_precedence_flag_over_variable_over_file_over_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, 'port = 9001\nlog_level = "debug"\nmax_backlog = 7\n')
    monkeypatch.setenv("CEBROKER_LOG_LEVEL", "warning")
    monkeypatch.setenv("CEBROKER_MAX_BACKLOG", "8")
    settings = serve("--config", str(path), "--max-backlog", "9")
    assert settings.port == 9001  # file over default
    assert settings.log_level == "warning"  # variable over file
    assert settings.max_backlog == 9  # flag over variable and file
    assert settings.host == "127.0.0.1"  # default
    # The variable names the file when the flag does not; the flag wins over it.
    monkeypatch.setenv("CEBROKER_CONFIG", str(path))
    assert serve().port == 9001
    other = write(tmp_path, "port = 9002\n", "other.toml")
    assert serve("--config", str(other)).port == 9002


def test_a_bad_config_variable_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CEBROKER_CONFIG", " ")
    assert "environment variable CEBROKER_CONFIG: empty value" in refused(capsys)


def print_config(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cebroker", "serve", "--print-config", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_print_config_shows_the_effective_settings_and_reads_back(tmp_path: Path) -> None:
    path = write(tmp_path, 'max_event_size = "2MiB"\nsources = ["nats://127.0.0.1:4222/e"]\nport = 9001\n')
    shown = print_config("--config", str(path), "--port", "9003", env={"CEBROKER_DEDUP_WINDOW": "1h"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "port = 9003  # flag --port" in lines
    assert "dedup_window = " + toml_string("1h") + "  # variable CEBROKER_DEDUP_WINDOW" in lines
    assert f'max_event_size = "2MiB"  # file {path}' in lines
    assert 'host = "127.0.0.1"  # default' in lines
    assert "# base_url is not set (default)" in lines
    again = write(tmp_path, shown.stdout, "again.toml")
    assert serve("--config", str(again)) == serve(
        "--config", str(path), "--port", "9003", "--dedup-window", "1h"
    )


def test_print_config_hides_secrets(tmp_path: Path) -> None:
    shown = print_config(env={"CEBROKER_DB": "postgresql://broker:s3cret-pw@db.example:5432/c"})
    assert shown.returncode == 0, shown.stderr
    assert "s3cret-pw" not in shown.stdout
    line = 'db = "postgresql://broker:***@db.example:5432/c"  # variable CEBROKER_DB'
    assert line in shown.stdout.splitlines()
    assert tomllib.loads(shown.stdout)["db"] == "postgresql://broker:***@db.example:5432/c"


def test_serve_exits_2_on_a_bad_file_without_a_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "port = 70000\n")
    result = print_config("--config", str(path))
    assert result.returncode == 2
    assert f"configuration file {path}: key 'port': must be between 0 and 65535" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_documented_configuration_file_is_accepted(tmp_path: Path) -> None:
    """The TOML examples of docs/deploy.md (the files they name replaced by files of the test)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "deploy.md").read_text(encoding="utf-8")
    examples = re.findall(r"```toml\n(.*?)```", text, flags=re.DOTALL)
    assert examples
    for number, example in enumerate(examples):
        for name in re.findall(r'= "(/etc/[^"]+)"', example):
            stand_in = tmp_path / Path(name).name
            stand_in.write_text("{}", encoding="utf-8")
            example = example.replace(f'"{name}"', toml_string(str(stand_in)))
        settings = serve("--config", str(write(tmp_path, example, f"example{number}.toml")))
        assert settings.max_event_size == 2 * 1024 * 1024
        assert settings.allow_sink_networks == ("10.20.0.0/16",)


def test_the_keys_are_the_flags_names_but_for_the_two_the_docs_name() -> None:
    """What the README and docs/deploy.md say of the keys."""
    renamed = {o.name: o.flag for o in SERVE_OPTIONS if o.flag != "--" + o.name.replace("_", "-")}
    assert renamed == {"sources": "--source", "secrets_key": "--secrets-key-file"}

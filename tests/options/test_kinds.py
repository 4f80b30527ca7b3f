"""The kinds of setting values (cebroker.options.kinds) and the declaration helpers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from cebroker.options import (
    Boolean,
    Choice,
    Duration,
    FilePath,
    HttpUrl,
    Integer,
    Kind,
    Many,
    Size,
    Text,
    check_declared,
    options_of,
    setting,
)

TRUE = ["on", "ON", "On", "true", "True", "TRUE", "yes", "YES", "1"]
FALSE = ["off", "OFF", "false", "False", "no", "NO", "0"]


@pytest.mark.parametrize("text", TRUE)
def test_every_spelling_of_on_is_on(text: str) -> None:
    assert Boolean().parse(text) is True


@pytest.mark.parametrize("text", FALSE)
def test_every_spelling_of_off_is_off(text: str) -> None:
    assert Boolean().parse(text) is False


@pytest.mark.parametrize("text", ["maybe", "enabled", "2", "-1", "onn", "y", "t", "tru"])
def test_other_spellings_are_refused_not_guessed(text: str) -> None:
    with pytest.raises(ValueError, match="must be on or off"):
        Boolean().parse(text)


@pytest.mark.parametrize(
    "kind",
    [Text(), HttpUrl(), FilePath(), Integer(), Size(), Duration(), Boolean(), Choice(("a",)), Many(Text())],
    ids=lambda kind: type(kind).__name__,
)
@pytest.mark.parametrize("text", ["", " ", "\t"])
def test_every_kind_refuses_an_empty_value(kind: Kind[object], text: str) -> None:
    with pytest.raises(ValueError, match="empty value"):
        kind.parse(text)


def test_choices_ignore_case_and_keep_their_spelling() -> None:
    kind = Choice(("off", "warn", "enforce"))
    assert kind.parse("WARN") == "warn"
    with pytest.raises(ValueError, match="must be one of off, warn, enforce"):
        kind.parse("strict")
    assert kind.metavar == "off|warn|enforce"


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        (Integer(0, 65535), "70000", "must be between 0 and 65535"),
        (Integer(minimum=1), "0", "must be at least 1"),
        (Integer(maximum=9), "10", "must be at most 9"),
        (Integer(), "8080.5", "not an integer"),
        (Size(), "0", "must be at least 1 byte"),
        (Duration(positive=True), "0s", "must be more than 0s"),
        (HttpUrl(), "localhost:8080", "not an absolute http"),
        (HttpUrl(), "ftp://host/", "not an absolute http"),
        (HttpUrl(), "http://", "not an absolute http"),
        (FilePath(must_exist=True), "no/such/file.json", "no such file"),
    ],
)
def test_limits(kind: Kind[object], text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        kind.parse(text)


def test_many_splits_on_spaces_and_names_the_bad_element() -> None:
    kind = Many(Integer(minimum=1))
    assert kind.parse(" 1  2\n3 ") == (1, 2, 3)
    with pytest.raises(ValueError, match="'0': must be at least 1"):
        kind.parse("1 0")
    assert kind.show(()) == "none"
    assert kind.show((1, 2)) == "1 2"


@dataclass(frozen=True, kw_only=True)
class Example:
    """A declaration as a later setting would be written."""

    retention: float = setting(86400.0, Duration(positive=True), "how long events are kept")
    retention_bytes: int | None = setting(None, Size(), "largest log", default_text="unlimited")
    schema: Path | None = setting(None, FilePath(), "a file", flag="--schema-file", metavar="PATH")
    plain: str = "not a setting"

    def __post_init__(self) -> None:
        check_declared(self)


def test_the_declaration_gives_flag_variable_default_and_help() -> None:
    retention, retention_bytes, schema = options_of(Example, "X_")
    assert (retention.name, retention.flag, retention.variable) == ("retention", "--retention", "X_RETENTION")
    assert (retention.shown_default, retention.placeholder) == ("1d", "DURATION")
    assert retention_bytes.variable == "X_RETENTION_BYTES"
    assert retention_bytes.shown_default == "unlimited"
    assert (schema.flag, schema.variable, schema.placeholder) == ("--schema-file", "X_SCHEMA", "PATH")
    assert schema.shown_default == "none"


def test_values_given_in_code_meet_the_same_limits() -> None:
    assert Example(retention=5.0).retention == 5.0
    with pytest.raises(ValueError, match=r"setting retention=0\.0: must be more than 0s"):
        Example(retention=0.0)
    with pytest.raises(ValueError, match="setting retention=-1.0"):
        Example(retention=-1.0)
    with pytest.raises(ValueError, match="setting retention_bytes=0"):
        Example(retention_bytes=0)

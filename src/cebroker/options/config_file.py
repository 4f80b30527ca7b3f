"""Settings read from a TOML file (``cebroker serve --config FILE`` or ``CEBROKER_CONFIG``).

Each key is a setting's name as declared (``max_event_size``, ``sources``), at the top level of
the file; its value goes through the same kind as the flag and the variable, so a value refused
on one is refused here too, with the same reason. A value may be written as the text a flag would
take (``"64KiB"``, ``"10s"``, ``"on"``) or, where TOML has the type, natively:

- switches: ``true`` / ``false``;
- whole numbers, sizes (bytes), durations (seconds) and ratios: numbers (``8080``, ``65536``, ``0.5``);
- repeatable settings and networks: arrays of strings (``sources = ["mqtt://...", "nats://..."]``).

Relative file names are taken from the working directory, as for flags and variables. An unknown
key, a value of the wrong TOML type or a value the setting refuses is an error naming the file, the
key and the reason (:class:`ConfigFileError`).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cebroker.options.declare import Option
from cebroker.options.kinds import Boolean, Duration, Integer, Kind, Many, Ratio, Size


class ConfigFileError(ValueError):
    """A configuration file that cannot be used: unreadable, not TOML, or a key or value refused."""

    def __init__(self, path: Path, reason: str, key: str | None = None) -> None:
        self.path, self.key, self.reason = path, key, reason
        where = f"{path}: key {key!r}" if key is not None else str(path)
        super().__init__(f"configuration file {where}: {reason}")


@dataclass(frozen=True)
class ConfigFile:
    """The settings one file gives: each option's name mapped to its parsed value."""

    path: Path
    values: Mapping[str, Any]


def load_config_file(path: Path, options: Iterable[Option[Any]]) -> ConfigFile:
    """Read ``path`` and parse each of its keys with the option of that name.

    Raises:
        ConfigFileError: the file cannot be read or parsed, a key names no setting, or a value is
            refused; the error names the file, the key and the reason.
    """
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigFileError(path, f"cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigFileError(path, "not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(path, f"not valid TOML: {exc}") from None
    by_name = {option.name: option for option in options}
    values: dict[str, Any] = {}
    for key, raw in document.items():
        option = by_name.get(key)
        if option is None:
            reason = "no such setting (keys are the settings' names, e.g. max_event_size)"
            raise ConfigFileError(path, reason, key)
        try:
            values[key] = _value(option.kind, raw)
        except ValueError as exc:
            raise ConfigFileError(path, str(exc), key) from None
    return ConfigFile(path, values)


def _value(kind: Kind[Any], raw: object) -> Any:
    """``raw`` (a TOML value) as a value of ``kind``, checked as the flag's text would be."""
    if isinstance(raw, str):
        return kind.parse(raw)
    if isinstance(raw, bool):  # before int: a TOML boolean is a Python bool, which is an int
        if not isinstance(kind, Boolean):
            raise ValueError(f"must be {_expected(kind)}, not a boolean")
        return raw
    if isinstance(raw, int | float):
        if isinstance(raw, float) and not isinstance(kind, Duration | Ratio):
            raise ValueError(f"must be {_expected(kind)}, not a fractional number")
        if not isinstance(kind, Integer | Size | Duration | Ratio):
            raise ValueError(f"must be {_expected(kind)}, not a number")
        if isinstance(kind, Duration | Ratio):
            kind.check(float(raw))
            return float(raw)
        kind.check(int(raw))
        return int(raw)
    if isinstance(raw, list):
        if not all(isinstance(item, str) for item in raw):
            raise ValueError("an array here holds strings only")
        if not kind.takes_list:
            raise ValueError(f"must be {_expected(kind)}, not an array")
        return kind.parse_items(raw)
    raise ValueError(f"must be {_expected(kind)}, not a {type(raw).__name__}")


def _expected(kind: Kind[Any]) -> str:
    if isinstance(kind, Boolean):
        return "true or false"
    if isinstance(kind, Many):
        return "an array of strings"
    if isinstance(kind, Integer):
        return "a whole number"
    if isinstance(kind, Size):
        return "a size (bytes, or a string with a unit)"
    if isinstance(kind, Duration):
        return "a duration (seconds, or a string with a unit)"
    if isinstance(kind, Ratio):
        return "a number from 0 to 1"
    return "a string"


def render_config(
    options: Iterable[Option[Any]], values: Mapping[str, Any], origins: Mapping[str, str]
) -> str:
    """The effective settings as a configuration file (``cebroker serve --print-config``): one
    ``name = value`` line per setting, with where its value came from as a comment.

    A setting without a value is a comment (TOML has no null). Values are written as the kind
    shows them and redacted as it redacts messages, so kinds that can carry a secret hide it (a
    database URL's password is ``***``); the file gives only the settings, never the content of
    the files they name (keys, certificates).
    """
    lines = [
        "# cebroker serve: effective settings",
        "# (a flag wins over its variable, which wins over the file, which wins over the default)",
    ]
    for option in options:
        value = values[option.name]
        origin = origins.get(option.name, "default")
        if value is None:
            lines.append(f"# {option.name} is not set ({origin})")
            continue
        lines.append(f"{option.name} = {_toml(option.kind, value)}  # {origin}")
    return "\n".join(lines) + "\n"


def _toml(kind: Kind[Any], value: Any) -> str:
    if isinstance(kind, Boolean):
        return "true" if value else "false"
    if isinstance(kind, Integer):
        return str(value)
    if isinstance(kind, Many):
        return "[" + ", ".join(json.dumps(kind.element.show(item)) for item in value) + "]"
    if kind.takes_list:
        return "[" + ", ".join(json.dumps(str(item)) for item in value) + "]"
    # A kind that can carry a secret hides it in what it shows and redacts; both are applied.
    # JSON's string escapes are TOML's basic string escapes.
    return json.dumps(kind.redact(kind.show(value)))

"""What a setting's value may be: each kind turns the text of a flag or an environment variable into
a value, checks it, and writes it back for help texts and documentation.

The same ``parse`` serves the flag and the variable, so a value refused on one is refused on the
other, with the same reason.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, TypeVar
from urllib.parse import urlsplit

from cebroker.options.units import format_duration, format_size, parse_duration, parse_size

T = TypeVar("T")

_INTEGER = re.compile(r"[+-]?\d+")
TRUE_SPELLINGS = ("on", "true", "yes", "1")
FALSE_SPELLINGS = ("off", "false", "no", "0")


class Kind(ABC, Generic[T]):
    """How one setting is written and checked. Subclasses give ``convert`` and, when values have
    limits, ``check``; ``parse`` applies both to any text, whichever way it came in."""

    #: Whether the value may be written as a list of texts (:meth:`parse_items`).
    takes_list: ClassVar[bool] = False

    @property
    def metavar(self) -> str:
        """Placeholder for the value in ``--help`` (``--port N``)."""
        return "VALUE"

    def parse(self, text: str) -> T:
        """The value written as ``text``.

        Raises:
            ValueError: ``text`` is empty, not of this kind, or out of its limits; the message says
                why without repeating ``text``.
        """
        if not text.strip():
            raise ValueError("empty value (unset it to get the default)")
        value = self.convert(text)
        self.check(value)
        return value

    @abstractmethod
    def convert(self, text: str) -> T:
        """``text`` as a value, unchecked; raises ValueError when it is not of this kind."""

    def check(self, value: T) -> None:
        """Raise ValueError when ``value`` is outside this kind's limits (also for values given in code)."""

    def show(self, value: T) -> str:
        """``value`` as a user would write it."""
        return str(value)

    def parse_items(self, items: Sequence[str]) -> T:
        """The value written as a list of texts (an array in a configuration file).

        Raises:
            ValueError: an item is refused, or this kind has no list form (``takes_list``).
        """
        raise ValueError("not a list")

    def redact(self, text: str) -> str:
        """``text`` as it may appear in messages and logs: kinds that can carry a secret (a
        database password) hide it here."""
        return text


@dataclass(frozen=True)
class Text(Kind[str]):
    """Any non-empty text."""

    @property
    def metavar(self) -> str:
        return "TEXT"

    def convert(self, text: str) -> str:
        return text

    def check(self, value: str) -> None:
        if not value.strip():
            raise ValueError("must not be empty")


@dataclass(frozen=True)
class HttpUrl(Kind[str]):
    """An absolute ``http://`` or ``https://`` URL with a host."""

    @property
    def metavar(self) -> str:
        return "URL"

    def convert(self, text: str) -> str:
        return text

    def check(self, value: str) -> None:
        parts = urlsplit(value)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError("not an absolute http:// or https:// URL")


#: URL schemes of database servers :class:`Database` accepts (each has a storage backend).
DATABASE_SCHEMES = ("postgresql", "postgres")


def redact_url(text: str) -> str:
    """``text`` with the password of a ``scheme://user:password@host`` URL replaced by ``***``."""
    parts = urlsplit(text) if "://" in text else None
    if parts is None or parts.password is None:
        return text
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return parts._replace(netloc=f"{user}:***@{netloc[2]}").geturl()


@dataclass(frozen=True)
class Database(Kind[str | Path]):
    """Where the broker keeps its state: a SQLite file path (or ``sqlite:`` URL), or a
    ``postgresql://user:password@host:port/dbname`` URL. The password never appears in messages."""

    @property
    def metavar(self) -> str:
        return "PATH|URL"

    def convert(self, text: str) -> str | Path:
        return text

    def check(self, value: str | Path) -> None:
        value = str(value)  # a Path given in code is a file
        if not value.strip():
            raise ValueError("must not be empty")
        scheme, sep, _ = value.partition("://")
        if not sep or scheme.lower() not in DATABASE_SCHEMES:
            return  # a file path (or a sqlite: URL): checked when the file is opened
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError as exc:  # a port that is not a number, a bad IPv6 literal
            raise ValueError(f"not a valid {scheme}:// URL: {exc}") from None
        if not parts.hostname and "host=" not in parts.query:
            raise ValueError(f"a {scheme}:// URL names a host: {scheme}://user:password@host:port/dbname")
        if port == 0:
            raise ValueError("port 0 is not a database server's port")

    def redact(self, text: str) -> str:
        return redact_url(text)

    def show(self, value: str | Path) -> str:
        return redact_url(str(value))


@dataclass(frozen=True)
class FilePath(Kind[Path]):
    """A file name; with ``must_exist``, a file that is there when the setting is read."""

    must_exist: bool = False

    @property
    def metavar(self) -> str:
        return "FILE"

    def convert(self, text: str) -> Path:
        return Path(text)

    def check(self, value: Path) -> None:
        if self.must_exist and not value.is_file():
            raise ValueError("no such file")


@dataclass(frozen=True)
class Integer(Kind[int]):
    """A whole number between ``minimum`` and ``maximum`` (either end open when None)."""

    minimum: int | None = None
    maximum: int | None = None

    @property
    def metavar(self) -> str:
        return "N"

    def convert(self, text: str) -> int:
        if not _INTEGER.fullmatch(text.strip()):
            raise ValueError("not an integer")
        return int(text)

    def check(self, value: int) -> None:
        low, high = self.minimum, self.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            if high is None:
                raise ValueError(f"must be at least {low}")
            if low is None:
                raise ValueError(f"must be at most {high}")
            raise ValueError(f"must be between {low} and {high}")


@dataclass(frozen=True)
class Size(Kind[int]):
    """A number of bytes, at least ``minimum`` (see :mod:`cebroker.options.units` for units)."""

    minimum: int = 1

    @property
    def metavar(self) -> str:
        return "SIZE"

    def convert(self, text: str) -> int:
        return parse_size(text)

    def check(self, value: int) -> None:
        if value < self.minimum:
            raise ValueError(f"must be at least {self.minimum} byte{'s' if self.minimum != 1 else ''}")

    def show(self, value: int) -> str:
        return format_size(value)


@dataclass(frozen=True)
class Duration(Kind[float]):
    """A duration in seconds (see :mod:`cebroker.options.units` for units); never negative, and
    more than zero when ``positive``, at least ``minimum`` when given."""

    positive: bool = False
    minimum: float | None = None

    @property
    def metavar(self) -> str:
        return "DURATION"

    def convert(self, text: str) -> float:
        return parse_duration(text)

    def check(self, value: float) -> None:
        if not math.isfinite(value) or value < 0:
            raise ValueError("must be a finite duration, not negative")
        if self.positive and value == 0:
            raise ValueError("must be more than 0s")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"must be at least {format_duration(self.minimum)}")

    def show(self, value: float) -> str:
        return format_duration(value)


@dataclass(frozen=True)
class Boolean(Kind[bool]):
    """On or off, spelled ``on``/``off``, ``true``/``false``, ``yes``/``no`` or ``1``/``0`` in any
    case. Anything else is refused: a misspelled switch must never flip to the other side."""

    @property
    def metavar(self) -> str:
        return "on|off"

    def convert(self, text: str) -> bool:
        spelled = text.strip().lower()
        if spelled in TRUE_SPELLINGS:
            return True
        if spelled in FALSE_SPELLINGS:
            return False
        raise ValueError("must be on or off (also true/false, yes/no, 1/0)")

    def show(self, value: bool) -> str:
        return "on" if value else "off"


@dataclass(frozen=True)
class Choice(Kind[str]):
    """One of ``values`` (compared case-insensitively, kept in the spelling of ``values``)."""

    values: tuple[str, ...]

    @property
    def metavar(self) -> str:
        return "|".join(self.values)

    def convert(self, text: str) -> str:
        spelled = text.strip().lower()
        for value in self.values:
            if value.lower() == spelled:
                return value
        raise ValueError(f"must be one of {', '.join(self.values)}")

    def check(self, value: str) -> None:
        if value not in self.values:
            raise ValueError(f"must be one of {', '.join(self.values)}")


@dataclass(frozen=True)
class Many(Kind[tuple[T, ...]]):
    """Several values of one kind: the flag is repeated, the variable separates them by spaces."""

    element: Kind[T]
    takes_list: ClassVar[bool] = True

    @property
    def metavar(self) -> str:
        return self.element.metavar

    def convert(self, text: str) -> tuple[T, ...]:
        return tuple(self._parse_one(item) for item in text.split())

    def _parse_one(self, item: str) -> T:
        try:
            return self.element.parse(item)
        except ValueError as exc:
            raise ValueError(f"{item!r}: {exc}") from exc

    def parse_items(self, items: Sequence[str]) -> tuple[T, ...]:
        return tuple(self._parse_one(item) for item in items)

    def check(self, value: tuple[T, ...]) -> None:
        for item in value:
            self.element.check(item)

    def show(self, value: tuple[T, ...]) -> str:
        return " ".join(self.element.show(item) for item in value) if value else "none"


@dataclass(frozen=True)
class Ratio(Kind[float]):
    """A number from 0 to 1."""

    @property
    def metavar(self) -> str:
        return "RATIO"

    def convert(self, text: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise ValueError("not a number") from None

    def check(self, value: float) -> None:
        if not 0.0 <= value <= 1.0:
            raise ValueError("must be between 0 and 1")

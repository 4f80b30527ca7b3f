"""Command-line flags and environment variables generated from :class:`~cebroker.options.declare.Option`.

A flag given on the command line wins over its variable, which wins over a configuration file
(:mod:`cebroker.options.config_file`, when the parser has one), which wins over the default. All
go through the option's kind, and a bad value of any is a usage error (exit status 2) that names
the flag, the variable or the file and key, and the reason: never a traceback, never a silent
default.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from cebroker.options.config_file import ConfigFile, ConfigFileError, load_config_file
from cebroker.options.declare import Option
from cebroker.options.kinds import Boolean, Kind, Many

T = TypeVar("T")


def argument_type(kind: Kind[T]) -> Callable[[str], T]:
    """An argparse ``type`` that parses with ``kind`` and reports its reason as argparse does."""

    def parse(text: str) -> T:
        try:
            return kind.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"invalid value {kind.redact(text)!r}: {exc}") from exc

    return parse


def help_text(option: Option[Any]) -> str:
    """The ``--help`` line of ``option``: what it does, its variable and its default."""
    variable = f" [{option.variable}]" if option.variable else ""
    text = f"{option.help}{variable} (default: {option.shown_default})"
    return text.replace("%", "%%")  # argparse %-formats help texts


class OptionParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` that also reads its options' environment variables.

    Options added with :meth:`add_option` are absent from the parsed namespace until parsing
    ends; then each one not given as a flag is taken from its variable, else its default. Parsers
    of subcommands are of this class too (argparse makes them of their parent's class), and each
    resolves its own options when it is the one chosen.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._options: list[Option[Any]] = []
        self._config_variable: str | None = None

    def add_config_file(self, flag: str, variable: str) -> None:
        """Read the options' values also from the TOML file named by ``flag`` or ``variable``
        (below flags and variables, above defaults). The parsed namespace gets ``config`` (the
        file, or None) and ``origins``: where each option's value came from."""
        self._config_variable = variable
        self.add_argument(
            flag,
            dest="config",
            default=None,
            type=Path,
            metavar="FILE",
            help=f"TOML file of settings keyed by their names (flags and variables win) [{variable}]",
        )

    def add_option(self, option: Option[Any]) -> None:
        """Add ``option``'s flag; a :class:`~cebroker.options.kinds.Many` option is repeatable, and
        a :class:`~cebroker.options.kinds.Boolean` flag given without a value means on."""
        self._options.append(option)
        kind = option.kind
        if isinstance(kind, Boolean):
            self.add_argument(
                option.flag,
                dest=option.name,
                default=argparse.SUPPRESS,
                type=argument_type(kind),
                nargs="?",
                const=True,
                metavar=option.placeholder,
                help=help_text(option),
            )
            return
        self.add_argument(
            option.flag,
            dest=option.name,
            # SUPPRESS keeps the name out of the namespace unless the flag is given, which is
            # how parse_known_args tells a flag from a value still to be looked up.
            default=argparse.SUPPRESS,
            type=argument_type(kind.element if isinstance(kind, Many) else kind),
            action="append" if isinstance(kind, Many) else "store",
            metavar=option.placeholder,
            help=help_text(option),
        )

    def add_options(self, options: Iterable[Option[Any]]) -> None:
        """Add each of ``options``."""
        for option in options:
            self.add_option(option)

    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        """Parse as argparse does, then fill each option not given as a flag from its variable or
        its default; exits with status 2 on a bad variable."""
        parsed, extras = super().parse_known_args(args, namespace)
        file = self._config_file(parsed)
        origins: dict[str, str] = {}
        for option in self._options:
            if hasattr(parsed, option.name):
                if isinstance(option.kind, Many):
                    setattr(parsed, option.name, tuple(getattr(parsed, option.name)))
                origins[option.name] = f"flag {option.flag}"
                continue
            value, origins[option.name] = self._from_environment(option, file)
            setattr(parsed, option.name, value)
        if self._config_variable is not None:
            parsed.origins = origins
        return parsed, extras

    def _config_file(self, parsed: Any) -> ConfigFile | None:
        if self._config_variable is None:
            return None
        path: Path | None = getattr(parsed, "config", None)
        if path is None:
            text = os.environ.get(self._config_variable)
            if text is None:
                return None
            if not text.strip():
                self.error(f"environment variable {self._config_variable}: empty value")
            path = parsed.config = Path(text)
        try:
            return load_config_file(path, self._options)
        except ConfigFileError as exc:
            self.error(str(exc))

    def _from_environment(self, option: Option[Any], file: ConfigFile | None) -> tuple[Any, str]:
        text = os.environ.get(option.variable) if option.variable else None
        if text is None:
            if file is not None and option.name in file.values:
                return file.values[option.name], f"file {file.path}"
            return option.default, "default"
        try:
            return option.kind.parse(text), f"variable {option.variable}"
        except ValueError as exc:
            self.error(
                f"environment variable {option.variable}: invalid value {option.kind.redact(text)!r}: {exc}"
            )

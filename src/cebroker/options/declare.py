"""One declaration per setting: a dataclass field made with :func:`setting`.

The field's name gives the flag (``max_event_size`` -> ``--max-event-size``) and the environment
variable (``CEBROKER_MAX_EVENT_SIZE`` with the prefix ``CEBROKER_``); its default is the setting's
default; its kind (:mod:`cebroker.options.kinds`) gives the type, range or choices. The command
line (:class:`cebroker.options.parser.OptionParser`), the variables, the help and the
documentation's table are all generated from these, so adding a setting is adding one field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from cebroker.options.kinds import Kind

T = TypeVar("T")

_DECLARED = "cebroker.option"


@dataclass(frozen=True)
class Option(Generic[T]):
    """One setting as the command line sees it.

    Attributes:
        name: attribute of the parsed arguments and of the settings object.
        kind: type, limits and spelling of the value.
        default: value when neither the flag nor the variable is given.
        help: what the setting does, for ``--help`` and the documentation.
        flag: the command-line flag, e.g. ``--max-event-size``.
        variable: the environment variable, if the setting has one.
        metavar: placeholder in ``--help``; the kind's when None.
        default_text: how to show the default when the value alone would mislead (a None that
            means "derived from other settings").
    """

    name: str
    kind: Kind[T]
    default: T | None
    help: str
    flag: str
    variable: str | None = None
    metavar: str | None = None
    default_text: str | None = None

    @property
    def shown_default(self) -> str:
        """The default as help texts and the documentation write it."""
        if self.default_text is not None:
            return self.default_text
        return "none" if self.default is None else self.kind.show(self.default)

    @property
    def placeholder(self) -> str:
        """The value's placeholder in ``--help``."""
        return self.metavar or self.kind.metavar


@dataclass(frozen=True)
class _Declaration:
    kind: Kind[Any]
    help: str
    flag: str | None
    metavar: str | None
    default_text: str | None


@overload
def setting(
    default: None,
    kind: Kind[T],
    help: str,
    *,
    flag: str | None = None,
    metavar: str | None = None,
    default_text: str | None = None,
) -> T | None: ...
@overload
def setting(
    default: T,
    kind: Kind[T],
    help: str,
    *,
    flag: str | None = None,
    metavar: str | None = None,
    default_text: str | None = None,
) -> T: ...
def setting(
    default: T | None,
    kind: Kind[T],
    help: str,
    *,
    flag: str | None = None,
    metavar: str | None = None,
    default_text: str | None = None,
) -> T | None:
    """Declare a dataclass field as a setting (use as the field's default).

    Args:
        default: the value when nothing sets it; None for an optional setting.
        kind: what the value may be.
        help: one line on what it does.
        flag: the flag, when it is not ``--`` and the name with dashes (``--source`` for
            ``sources``).
        metavar: placeholder in ``--help`` instead of the kind's.
        default_text: how to show the default instead of the value itself.
    """
    declaration = _Declaration(kind, help, flag, metavar, default_text)
    field: T | None = dataclasses.field(default=default, metadata={_DECLARED: declaration})
    return field


def options_of(cls: type[Any], variable_prefix: str) -> tuple[Option[Any], ...]:
    """Every setting declared on the dataclass ``cls``, in field order, with its flag and its
    variable (``variable_prefix`` + the name in capitals)."""
    options = []
    for field in dataclasses.fields(cls):
        declaration = field.metadata.get(_DECLARED)
        if not isinstance(declaration, _Declaration):
            continue
        options.append(
            Option(
                name=field.name,
                kind=declaration.kind,
                default=field.default,
                help=declaration.help,
                flag=declaration.flag or "--" + field.name.replace("_", "-"),
                variable=variable_prefix + field.name.upper(),
                metavar=declaration.metavar,
                default_text=declaration.default_text,
            )
        )
    return tuple(options)


def check_declared(instance: Any) -> None:
    """Apply each declared setting's check to its value on ``instance`` (a dataclass), so that
    settings built in code meet the same limits as those read from flags and variables.

    Raises:
        ValueError: naming the first setting whose value is outside its limits.
    """
    for option in options_of(type(instance), ""):
        value = getattr(instance, option.name)
        if value is None:
            continue
        try:
            option.kind.check(value)
        except ValueError as exc:
            shown = option.kind.redact(value) if isinstance(value, str) else value
            raise ValueError(f"setting {option.name}={shown!r}: {exc}") from exc

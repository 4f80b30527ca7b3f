"""Reading ``protocolsettings`` (Subscriptions API 3.2.5) with one clear error per bad member.

Setting names are matched case-insensitively, so both the spec's ``linkname`` and the OpenAPI
document's ``linkName`` work. Every protocol also takes ``contentmode`` (``binary`` or
``structured``), which the spec leaves to the implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ceprotocols.errors import SettingsError

CONTENT_MODES = ("binary", "structured")


class SettingsReader:
    """Typed, validated access to one subscription's protocol settings."""

    def __init__(self, settings: Mapping[str, Any] | None) -> None:
        self._values = {str(k).lower(): v for k, v in (settings or {}).items()}

    def _field(self, name: str) -> str:
        return f"protocolsettings.{name}"

    def raw(self, name: str) -> Any:
        """The setting's JSON value as given, or ``None``."""
        return self._values.get(name.lower())

    def string(self, name: str, *, required: bool = False, default: str | None = None) -> str | None:
        """A non-empty string setting."""
        value = self._values.get(name.lower())
        if value is None:
            if required:
                raise SettingsError(self._field(name), "is required")
            return default
        if not isinstance(value, str) or not value:
            raise SettingsError(self._field(name), "must be a non-empty string")
        return value

    def integer(self, name: str, *, default: int | None = None, choices: tuple[int, ...] = ()) -> int | None:
        """An integer setting (a JSON number without fraction), optionally one of ``choices``."""
        value = self._values.get(name.lower())
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(self._field(name), "must be an integer")
        if choices and value not in choices:
            raise SettingsError(self._field(name), f"must be one of {', '.join(map(str, choices))}")
        return value

    def boolean(self, name: str, *, default: bool = False) -> bool:
        """A boolean setting."""
        value = self._values.get(name.lower())
        if value is None:
            return default
        if not isinstance(value, bool):
            raise SettingsError(self._field(name), "must be true or false")
        return value

    def string_map(self, name: str) -> dict[str, str]:
        """A map of string keys to string values."""
        value = self._values.get(name.lower())
        if value is None:
            return {}
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise SettingsError(self._field(name), "must be an object of string values")
        return dict(value)

    def choice(self, name: str, choices: tuple[str, ...], *, default: str) -> str:
        """A string setting from a fixed set, compared case-insensitively."""
        value = self.string(name) or default
        if value.lower() not in choices:
            raise SettingsError(self._field(name), f"must be one of {', '.join(choices)}")
        return value.lower()

    def content_mode(self, *, default: str = "binary") -> str:
        """``contentmode``: ``binary`` or ``structured``."""
        return self.choice("contentmode", CONTENT_MODES, default=default)

"""A subscription's ``protocolsettings`` as typed values, for the protocols whose settings the
broker itself reads: :class:`HttpSettings` (the lanes batch by ``contentmode``) and
:class:`PullSettings` (locks, delivery counts and release delays of pull delivery).

The settings of MQTT3, MQTT5, AMQP, KAFKA and NATS are read by their senders only: the sender
library (``ceprotocols``, which never imports the broker) parses them into its own typed values
(``ceprotocols.mqtt.settings.MqttSettings`` and its siblings) from the settings map a
``Destination`` carries, with the same function the Subscriptions API asks before it accepts a
subscription (``ceprotocols.check_destination``).

The API checks every member and applies the defaults, which it takes from the fields here
(:func:`default_of`): each default lives once, on its dataclass. :func:`stored_protocol_settings`
builds the typed value of an accepted subscription; a member a record stored by an earlier
release holds in a form this release does not read takes its default, with a warning that names
its pointer.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("cebroker.subscriptions")

#: HTTP's content modes: one event per request in binary or structured mode, or a batch.
HTTP_CONTENT_MODES = ("binary", "structured", "batch")
#: The methods an HTTP sink may be called with.
HTTP_METHODS = ("POST", "PUT", "PATCH")


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpSettings:
    """An HTTP subscription's settings (its webhook secret is the subscription's own
    ``webhook_secret``, write-only)."""

    method: str = "POST"
    #: Extra request headers, in the order given.
    headers: tuple[tuple[str, str], ...] = ()
    #: ``binary``, ``structured`` or ``batch`` (lower case).
    contentmode: str = "binary"

    @property
    def batch(self) -> bool:
        """Whether deliveries go out in batches (``contentmode: batch``)."""
        return self.contentmode == "batch"


@dataclass(frozen=True, slots=True, kw_only=True)
class PullSettings:
    """A PULL subscription's settings (docs/pull.md)."""

    #: Seconds a received event stays locked to its consumer.
    lockduration: int = 60
    #: Receives after which an event is dead-lettered.
    maxdeliverycount: int = 10
    #: Seconds a released event waits before it is handed out again.
    releasedelay: int = 0


#: The typed settings of a subscription; None for a protocol only its sender reads.
ProtocolSettings = HttpSettings | PullSettings | None


def default_of(kind: type[HttpSettings] | type[PullSettings], name: str) -> Any:
    """The default of the member ``name`` of ``kind``: what the API applies when it is left out.

    Raises:
        KeyError: ``kind`` has no member ``name`` with a default value.
    """
    for member in dataclasses.fields(kind):
        if member.name == name and member.default is not dataclasses.MISSING:
            return member.default
    raise KeyError(name)


class _Reader:
    """Reads the members of one settings map (names in any case), each as its field's type; a
    member in another form takes the field's default and is named in a warning."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._values = {str(k).lower(): v for k, v in settings.items()}
        self.refused: list[str] = []

    def _refuse(self, name: str) -> None:
        self.refused.append(f"/protocolsettings/{name}")

    def integer(self, name: str, default: int) -> int:
        value = self._values.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self._refuse(name)
            return default
        return value

    def choice(self, name: str, default: str, choices: tuple[str, ...], *, upper: bool = False) -> str:
        value = self._values.get(name, default)
        if isinstance(value, str):
            value = value.upper() if upper else value.lower()
            if value in choices:
                return value
        self._refuse(name)
        return default

    def pairs(self, name: str) -> tuple[tuple[str, str], ...]:
        value = self._values.get(name, {})
        if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
            return tuple((str(k), v) for k, v in value.items())
        self._refuse(name)
        return ()


#: The defaults, as values (read for every subscription built).
_HTTP = HttpSettings()
_PULL = PullSettings()


def _http(read: _Reader) -> HttpSettings:
    return HttpSettings(
        method=read.choice("method", _HTTP.method, HTTP_METHODS, upper=True),
        headers=read.pairs("headers"),
        contentmode=read.choice("contentmode", _HTTP.contentmode, HTTP_CONTENT_MODES),
    )


def _pull(read: _Reader) -> PullSettings:
    return PullSettings(
        lockduration=read.integer("lockduration", _PULL.lockduration),
        maxdeliverycount=read.integer("maxdeliverycount", _PULL.maxdeliverycount),
        releasedelay=read.integer("releasedelay", _PULL.releasedelay),
    )


def stored_protocol_settings(protocol: str, settings: Mapping[str, Any]) -> ProtocolSettings:
    """The typed settings of an accepted subscription of ``protocol`` (see the module's notes)."""
    read = _Reader(settings)
    typed: ProtocolSettings
    if protocol == "HTTP":
        typed = _http(read)
    elif protocol == "PULL":
        typed = _pull(read)
    else:
        return None
    if read.refused:
        log.warning(
            "a stored subscription's protocolsettings hold values this release does not read;"
            " their defaults apply: %s",
            ", ".join(read.refused),
        )
    return typed

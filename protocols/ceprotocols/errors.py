"""ceprotocols' exception hierarchy; every client library's exception is translated into these
inside the adapter that called it, so callers never see paho, proton, confluent-kafka, nats or
httptools exceptions::

    ProtocolError
    ├── BindingError (ValueError)   a message is not a valid CloudEvent for its binding
    ├── SettingsError (ValueError)  a sink, protocol setting or credential is unusable
    └── DeliveryError               a send did not complete; ``retryable`` tells what to do next
        ├── TargetUnreachable       connect/transport failure (retryable)
        ├── DeliveryTimeout         no confirmation in time (retryable)
        └── DeliveryRejected        the target refused the message (retryable only for
            │                       transient refusals such as HTTP 5xx/408/429)
            └── DestinationRefused  the network policy forbids the destination's address (final)
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base of every ceprotocols error."""


class BindingError(ProtocolError, ValueError):
    """A wire message could not be decoded as (or an event encoded into) a CloudEvent."""


class DeliveryError(ProtocolError):
    """A delivery attempt failed.

    Attributes:
        retryable: whether a later attempt may succeed.
        retry_after: seconds the target asked us to wait (e.g. HTTP ``Retry-After``), if any.
        status: protocol status code, if the protocol has one (HTTP status, AMQP outcome name...).
        body: a truncated response body or reason text, for the dead letter.
    """

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        retry_after: float | None = None,
        status: int | str | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.body = body


class TargetUnreachable(DeliveryError):
    """The target could not be reached (DNS, connect, TLS, connection lost)."""


class DeliveryTimeout(DeliveryError):
    """The target did not confirm the delivery in time."""


class DeliveryRejected(DeliveryError):
    """The target answered and refused the message."""

    retryable = False


class DestinationRefused(DeliveryRejected):
    """The destination is, or resolves to, an address the network policy refuses (loopback,
    private, link-local...), found right before connecting; nothing was sent. Final: sending
    again would be refused the same way. ``status`` is ``"destination"``."""

    retryable = False

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False, status="destination")


class SettingsError(ProtocolError, ValueError):
    """A subscription's sink, ``protocolsettings`` or ``sinkcredential`` cannot work for its
    protocol. ``field`` names the offending member (``protocolsettings.qos``, ``sink``...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class RejectedAsInvalid:
    """A context manager that turns the given errors into a final ``DeliveryRejected``.

    An unusable destination (``SettingsError``) or an event its binding cannot encode
    (``BindingError``) fails the same way on every attempt, so the delivery is refused for good,
    with status ``invalid``. Instances hold no state and are shared.
    """

    __slots__ = ("kinds",)

    def __init__(self, *kinds: type[ProtocolError]) -> None:
        self.kinds = kinds

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        if exc is not None and isinstance(exc, self.kinds):
            raise DeliveryRejected(str(exc), retryable=False, status="invalid") from exc


INVALID_SETTINGS = RejectedAsInvalid(SettingsError)
"""Wraps the parsing of a destination's sink settings and credential."""

INVALID_EVENT = RejectedAsInvalid(BindingError)
"""Wraps the encoding of an event into its protocol's message."""

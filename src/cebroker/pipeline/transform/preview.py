"""A transformation's outcome as the explain and dry-run answers show it.

``{"outcome": "delivered" | "dropped" | "failed", ...}``: a delivered outcome adds the outgoing
``event`` (JSON event format), the ``delivery`` (the output's ``$delivery``, as applied) and the
``sink`` it goes to (with an HTTP path applied); for HTTP also the ``message``: the request's
headers (those of the subscription's settings and the transformation, then the binding's) and
its ``body`` (``body_base64`` when it is not UTF-8), encoded by the HTTP binding the sender
uses. Credentials and the webhook signature are added when the request is sent and are not
shown. ``warnings``: how the output differs from its registered definition (with
``--event-validation warn``; with ``enforce`` that is a failure). A failed outcome adds the
``error`` (``reason``, ``position``) a dead letter would show.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from ceprotocols.errors import BindingError
from ceprotocols.http.binding import to_batch, to_binary, to_structured
from ceprotocols.sender import Destination

from cebroker.pipeline.transform.apply import Dropped, Failed, Outcome, Outgoing, OutputCheck, transform
from cebroker.pipeline.transform.programs import compile_of
from cebroker.subscription import Subscription
from cebroker.subscription_settings.protocols import HttpSettings

__all__ = ["destination_of", "preview", "preview_json"]


def destination_of(subscription: Subscription) -> Destination:
    """The subscription's destination as a lane builds it, without its secrets (a preview only
    reads the protocol, the sink and the settings)."""
    return Destination(
        protocol=subscription.protocol, sink=subscription.sink, settings=subscription.protocolsettings
    )


def batching(subscription: Subscription) -> bool:
    """Whether the subscription's deliveries go out in batches (HTTP ``contentmode: batch``)."""
    settings = subscription.protocol_settings
    return isinstance(settings, HttpSettings) and settings.batch


def preview(
    subscription: Subscription, event: Mapping[str, Any], check: OutputCheck | None = None
) -> dict[str, Any] | None:
    """The transformation's outcome for ``event`` as JSON; ``None`` without a transformation.
    ``check``: the registry's check of the output, as deliveries have it."""
    compiled = compile_of(subscription)
    if compiled is None:
        return None
    settings = subscription.protocol_settings
    http = settings if isinstance(settings, HttpSettings) else None
    if isinstance(compiled, Failed):
        return preview_json(compiled, http)
    outcome = transform(
        compiled, event, destination_of(subscription), batch=batching(subscription), check=check
    )
    return preview_json(outcome, http)


def preview_json(outcome: Outcome, http: HttpSettings | None) -> dict[str, Any]:
    """One outcome as JSON (see the module docstring); ``http``: the settings of an HTTP
    subscription, which make the message shown."""
    if isinstance(outcome, Dropped):
        return {"outcome": "dropped"}
    if isinstance(outcome, Failed):
        return {
            "outcome": "failed",
            "error": {"reason": outcome.message, "position": _position(outcome.position)},
        }
    doc: dict[str, Any] = {
        "outcome": "delivered",
        "event": dict(outcome.event),
        "delivery": outcome.extras.to_json(),
        "sink": outcome.destination.sink,
    }
    if outcome.destination.protocol == "HTTP" and http is not None:
        doc["message"] = _http_message(outcome, http)
    if outcome.warnings:
        doc["warnings"] = list(outcome.warnings)
    return doc


def _http_message(outcome: Outgoing, settings: HttpSettings) -> dict[str, Any]:
    mode = settings.contentmode
    try:
        if mode == "batch":
            message = to_batch([outcome.event])
        else:
            message = to_structured(outcome.event) if mode == "structured" else to_binary(outcome.event)
    except BindingError as error:
        return {"error": f"the event cannot be encoded for HTTP: {error}"}
    # The destination's headers: the subscription's with the transformation's added.
    headers = {str(k): str(v) for k, v in (outcome.destination.settings.get("headers") or {}).items()}
    headers.update(message.headers)
    doc: dict[str, Any] = {"method": settings.method, "headers": headers}
    try:
        doc["body"] = message.body.decode()
    except UnicodeDecodeError:
        doc["body_base64"] = base64.b64encode(message.body).decode()
    return doc


def _position(position: object) -> object:
    if position is None or isinstance(position, int | str):
        return position
    if isinstance(position, tuple):
        return list(position)
    return str(position)

"""Contracts between the event pipeline and the parts that feed or inspect it.

The registry and protocol ingress feed events in through an :class:`Ingestor`; the registry
checks events for the pipeline as an :class:`EventValidator`; protocol ingress tells its
broker events (docs/broker-events.md) through a :class:`BrokerEventEmitter`. They live here, below every
part, so that neither the registry nor the sources depend on the pipeline's modules, nor the
pipeline on the registry's.

An *event* inside the broker is a CloudEvent in the JSON event format, as a plain dict: every
attribute (extensions included) a top-level member with its JSON type, and the payload in
``data`` (a JSON value) or ``data_base64`` (a base64 string), never both. Protocol ingress,
the registry's change events and ``POST /events`` all produce this form.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ceprotocols.tracecontext import TraceContext

Event = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What an ingest call did: ``accepted`` events were committed durably, ``duplicates`` of
    them were already seen within the de-duplication window and will not be delivered again."""

    accepted: int
    duplicates: int


@runtime_checkable
class Ingestor(Protocol):
    """The durable entry to the pipeline.

    ``ingest`` returns only after every event is committed to the durable log (all or nothing).
    It raises :class:`cebroker.errors.ValidationError` (pointers ``/<index>/<attribute>``) for
    invalid events, storing none of them, and :class:`cebroker.errors.Overloaded` when the
    durable backlog is over its bound.
    """

    async def ingest(
        self, events: Sequence[Event], traces: Sequence[TraceContext | None] = ()
    ) -> IngestResult:
        """Validate, commit and schedule ``events`` for matching and delivery; ``traces``, when
        given, has per event the trace context its message carried (a protocol source's
        ``traceparent`` header or property), the parent of its publish span unless the event
        has a ``traceparent`` attribute of its own."""
        ...


class ValidationMode(enum.Enum):
    """How the ingress treats violations found by an :class:`EventValidator`."""

    OFF = "off"
    WARN = "warn"
    ENFORCE = "enforce"


@dataclass(frozen=True, slots=True)
class Violation:
    """One way an event differs from its message definition; ``pointer`` names the attribute
    (``/type``) or the place in ``data`` (``/data/amount``)."""

    pointer: str
    message: str


@runtime_checkable
class EventValidator(Protocol):
    """Checks events against registered definitions (implemented by the registry)."""

    def validate(self, event: Event) -> list[Violation]:
        """Every violation of the event's definition; empty when it conforms or has none."""
        ...


class BrokerEventEmitter(Protocol):
    """Where a part below the pipeline tells a broker event (the pipeline's emitter is one).

    ``emit`` queues the event ``dev.cebroker.<kind>`` with JSON ``data`` concerning ``tenant``
    (None: no tenant) and returns at once; ``key`` makes its id unique across instances (None:
    a random id). Called on the event loop's thread only.
    """

    def emit(self, kind: str, data: Mapping[str, Any], *, tenant: str | None, key: str | None = None) -> None:
        """Queue the broker event; never blocks, never raises."""
        ...

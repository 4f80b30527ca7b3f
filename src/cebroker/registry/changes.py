"""Change events: what one write request changed, as CloudEvents for the broker's ingest path.

Types follow the xRegistry events spec, ``io.xregistry.<entity>.<created|updated|deleted>``
with ``<entity>`` one of ``registry``, ``group``, ``resource``, ``version``; ``subject`` is the
entity's xid, ``source`` the registry's base URL, ``time`` the request's timestamp, and one
``xregcorrelationid`` per request. Updates carry ``data: {"changed": [names]}``.

Writes to message and schema groups, resources and versions also produce the older types
their predecessor specs define, with no data: ``io.cloudevents.messagecatalog.updated.v1`` /
``deleted.v1`` and ``io.cloudevents.schemaregistry.updated.v1`` / ``deleted.v1``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from cebroker.storage.registry import Kind

Op = Literal["created", "updated", "deleted"]
_PRECEDENCE: dict[Op, int] = {"updated": 0, "created": 1, "deleted": 2}
_LEGACY_PREFIX = {
    "messagegroups": "io.cloudevents.messagecatalog",
    "schemagroups": "io.cloudevents.schemaregistry",
}
XREGISTRY_PREFIX = "io.xregistry."


@dataclass(slots=True)
class Change:
    """One entity changed by a request."""

    xid: str
    kind: Kind
    op: Op
    changed: list[str] = field(default_factory=list)

    @property
    def group_type(self) -> str | None:
        """The plural group type the entity belongs to (None for the registry)."""
        parts = self.xid.strip("/").split("/")
        return parts[0] if parts[0] else None


class ChangeLog:
    """The changes of one request; at most one per subject, ``deleted`` > ``created`` > ``updated``."""

    def __init__(self, time: str = "") -> None:
        #: the request's timestamp (every entity it touched got it as ``modifiedat``)
        self.time = time
        #: one value for every event of the request (also returned to the client)
        self.correlation = str(uuid.uuid4())
        self._changes: dict[str, Change] = {}

    def record(self, xid: str, kind: Kind, op: Op, changed: list[str] | None = None) -> None:
        """Note a change of ``xid``; a stronger change of the same subject replaces a weaker one."""
        prev = self._changes.get(xid)
        if prev is not None:
            if prev.op == "deleted" and op == "created":
                # deleted and re-created in one request: the entity was replaced
                prev.op = "updated"
                return
            if _PRECEDENCE[op] < _PRECEDENCE[prev.op]:
                return
            if op == prev.op == "updated":
                prev.changed = sorted(set(prev.changed) | set(changed or []))
                return
        self._changes[xid] = Change(xid, kind, op, list(changed or []))

    def __iter__(self) -> Any:
        return iter(self._changes.values())

    def __len__(self) -> int:
        return len(self._changes)

    def touches(self, group_type: str) -> bool:
        """True when any change is within ``group_type``."""
        return any(c.group_type == group_type for c in self._changes.values())


def build_events(changes: ChangeLog, source: str, time: str) -> list[dict[str, Any]]:
    """The CloudEvents (JSON-format dicts) announcing ``changes``."""
    events: list[dict[str, Any]] = []
    for change in changes:
        base = {"specversion": "1.0", "source": source, "subject": change.xid, "time": time}
        event: dict[str, Any] = {
            **base,
            "id": str(uuid.uuid4()),
            "type": f"{XREGISTRY_PREFIX}{change.kind}.{change.op}",
            "xregcorrelationid": changes.correlation,
        }
        if change.op == "updated":
            event["datacontenttype"] = "application/json"
            event["data"] = {"changed": change.changed}
        events.append(event)
        legacy = _LEGACY_PREFIX.get(change.group_type or "")
        if legacy is not None and change.kind != "registry":
            suffix = "deleted" if change.op == "deleted" else "updated"
            events.append({**base, "id": str(uuid.uuid4()), "type": f"{legacy}.{suffix}.v1"})
    return events

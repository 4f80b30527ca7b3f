"""The audit log: one structured line per management write, allowed or refused.

Management writes are subscription creates, replaces and deletes, dead-letter re-drives and
registry writes (see :func:`cebroker.auth.scopes.audited`). Each becomes one line on the
``cebroker.audit`` logger, a JSON object with ``time``, ``principal``, ``tenant``, ``action``,
``target``, ``outcome`` (``ok``, ``refused`` for missing or insufficient credentials,
``failed`` for any other error) and ``status``. Lines never hold a request body, so no secret
reaches them.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from cebroker.principal import Principal

log = logging.getLogger("cebroker.audit")

_ACTIONS = {
    ("POST", "subscriptions"): "subscription.create",
    ("PUT", "subscription"): "subscription.replace",
    ("DELETE", "subscription"): "subscription.delete",
    ("POST", "redrive"): "deadletters.redrive",
}


def action_of(method: str, path: str) -> str:
    """A short name of what the call does (``subscription.create``, ``registry.put``)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["subscriptions"]:
        kind = {1: "subscriptions", 2: "subscription"}.get(len(parts), parts[-1])
        return _ACTIONS.get((method, kind), f"{method.lower()} {path[:200]}")
    return f"registry.{method.lower()}"


def outcome_of(status: int) -> str:
    """``ok``, ``refused`` or ``failed`` for a response status."""
    if status < 400:
        return "ok"
    return "refused" if status in (401, 403) else "failed"


def record(
    principal: Principal | None, method: str, path: str, status: int, *, location: str | None = None
) -> None:
    """Write the audit line of one management write that was answered with ``status``."""
    target = location if status == 201 and location else path
    line = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "principal": principal.id if principal is not None else None,
        "tenant": principal.tenant if principal is not None else None,
        "action": action_of(method, path),
        "target": target[:512],
        "outcome": outcome_of(status),
        "status": status,
    }
    log.info("%s", json.dumps(line, ensure_ascii=False))

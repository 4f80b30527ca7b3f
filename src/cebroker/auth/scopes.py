"""Which scope each route needs: one table for the whole broker, read top to bottom.

A rule names a path pattern, the scope per method and the scope of any other method (which
the route answers with 405, after the check: a caller without the scope learns nothing about
the route). A path no rule matches needs ``admin``, so a route added without a rule is closed
rather than open. ``PUBLIC`` paths need no credentials; ``ANY`` paths any principal.

Tenant scoping is not decided here: the parts compare the principal's tenant with the
subscription's (another tenant's subscription is "not found").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from cebroker.principal import (
    ADMIN,
    DEADLETTERS_MANAGE,
    EVENTS_PUBLISH,
    EVENTS_RECEIVE,
    METRICS_READ,
    REGISTRY_READ,
    REGISTRY_WRITE,
    SUBSCRIPTIONS_READ,
    SUBSCRIPTIONS_WRITE,
)

#: No credentials needed.
PUBLIC: Final = "public"
#: Any principal, whatever its scopes.
ANY: Final = "any"

_READ_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass(frozen=True, slots=True)
class AccessRule:
    """The scopes of the paths ``pattern`` matches (a regular expression, matched whole)."""

    pattern: re.Pattern[str]
    methods: Mapping[str, str]
    otherwise: str
    #: The methods whose calls are management writes, logged to the audit log.
    audited: frozenset[str] = field(default_factory=frozenset)

    def matches(self, path: str) -> bool:
        """Whether the rule covers ``path``."""
        return self.pattern.fullmatch(path) is not None

    def scope(self, method: str) -> str:
        """The scope a call with ``method`` needs."""
        return self.methods.get(method, self.otherwise)


def _rule(
    pattern: str, methods: Mapping[str, str], otherwise: str, audited: frozenset[str] = frozenset()
) -> AccessRule:
    return AccessRule(re.compile(pattern, re.DOTALL), methods, otherwise, audited)


def _read_write(read: str, write: str, *writes: str) -> Mapping[str, str]:
    return {**{m: read for m in _READ_METHODS}, **{m: write for m in writes}}


_ID = r"[^/]+"
#: The Event Grid namespace compatibility routes (docs/eventgrid.md), where an API key may also
#: come as ``Authorization: SharedAccessKey <key>``.
EVENT_GRID_PREFIX = "/topics/"
_REGISTRY_WRITES = frozenset({"PUT", "POST", "PATCH", "DELETE"})

#: Every rule, first match wins.
RULES: tuple[AccessRule, ...] = (
    _rule("/healthz|/readyz", {}, PUBLIC),
    # The console's page shell and assets, and the API reference page: no data, only code.
    # (Any other method on them is answered 405 by the route, which reveals nothing either.)
    _rule("/console/?|/console/assets/.*|/docs|/docs/assets/.*", {}, PUBLIC),
    _rule("/openapi.json", {}, ANY),
    _rule("/metrics", {}, METRICS_READ),
    _rule("/events", {"POST": EVENTS_PUBLISH}, EVENTS_PUBLISH),
    _rule(
        "/subscriptions",
        _read_write(SUBSCRIPTIONS_READ, SUBSCRIPTIONS_WRITE, "POST"),
        SUBSCRIPTIONS_WRITE,
        frozenset({"POST"}),
    ),
    _rule(
        f"/subscriptions/{_ID}",
        _read_write(SUBSCRIPTIONS_READ, SUBSCRIPTIONS_WRITE, "PUT", "DELETE"),
        SUBSCRIPTIONS_WRITE,
        frozenset({"PUT", "DELETE"}),
    ),
    _rule(f"/subscriptions/{_ID}/(status|tail)", {}, SUBSCRIPTIONS_READ),
    _rule(f"/subscriptions/{_ID}/explain|/explain", {}, SUBSCRIPTIONS_READ),
    # The broker's totals are an operator's view, like the metrics; the per-subscription health
    # lists the caller's tenant's subscriptions only.
    _rule("/status", {}, METRICS_READ),
    _rule("/status/subscriptions", {}, SUBSCRIPTIONS_READ),
    # The protocol sources are the operator's: their health is an operator's view, and what they
    # refused holds messages of every producer, whatever the tenant.
    _rule("/sources", {}, METRICS_READ),
    _rule(f"/sources/{_ID}/rejects", {}, ADMIN),
    _rule(f"/subscriptions/{_ID}/deadletters", {}, DEADLETTERS_MANAGE),
    # Pull delivery: the consumer's calls on its PULL subscription (tenant-checked by the part).
    _rule(f"/subscriptions/{_ID}/(receive|acknowledge|release|reject|renew)", {}, EVENTS_RECEIVE),
    # Their Event Grid faces (publish to a topic; settle through an event subscription).
    _rule(f"/topics/{_ID}:publish", {"POST": EVENTS_PUBLISH}, EVENTS_PUBLISH),
    _rule(
        f"/topics/{_ID}/eventsubscriptions/{_ID}:(receive|acknowledge|release|reject|renewLock)",
        {},
        EVENTS_RECEIVE,
    ),
    # Replays deliver again, to the subscription's own sink, events it matched (or would have):
    # the subscriber's to start and cancel, as the subscription itself is.
    _rule(
        f"/subscriptions/{_ID}/replay|/subscriptions/{_ID}/replays(/{_ID})?",
        _read_write(SUBSCRIPTIONS_READ, SUBSCRIPTIONS_WRITE, "POST", "DELETE"),
        SUBSCRIPTIONS_WRITE,
        frozenset({"POST", "DELETE"}),
    ),
    _rule(
        f"/subscriptions/{_ID}/deadletters/redrive",
        {},
        DEADLETTERS_MANAGE,
        frozenset({"POST"}),
    ),
    # The registry: everything else at the root and under its group collections.
    _rule(
        "/|/model|/modelsource|/capabilities|/export|/schema|/messagedefinition"
        "|/(endpoints|messagegroups|schemagroups)(/.*)?",
        _read_write(REGISTRY_READ, REGISTRY_WRITE),
        REGISTRY_WRITE,
        _REGISTRY_WRITES,
    ),
)


def rule_for(path: str) -> AccessRule | None:
    """The first rule covering ``path``, or None (the path then needs ``admin``)."""
    for rule in RULES:
        if rule.matches(path):
            return rule
    return None


def required_scope(method: str, path: str) -> str:
    """The scope a call needs: a scope name, :data:`PUBLIC` or :data:`ANY`."""
    rule = rule_for(path)
    return ADMIN if rule is None else rule.scope(method)


def audited(method: str, path: str) -> bool:
    """Whether a call is a management write (logged to the audit log whatever its outcome)."""
    rule = rule_for(path)
    if rule is None:
        return method not in _READ_METHODS
    return method in rule.audited

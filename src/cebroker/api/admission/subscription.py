"""Turning a proposed subscription (parsed JSON) into a realized :class:`Subscription`.

Every problem in the request is collected and reported at once; nothing is realized unless
the whole request is valid. Field rules follow the Subscriptions API spec, sections 3.2.1
(subscription object), 3.2.2 (protocol settings), 3.2.3 (sink credentials) and 3.2.4 (filters).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import SplitResult

import cefilters

from cebroker.api.admission import checks
from cebroker.api.admission.checks import Check
from cebroker.api.admission.credentials import validate_credential
from cebroker.api.admission.delivery import check_deliverable
from cebroker.api.admission.problems import Problems, child, quote, type_name
from cebroker.api.admission.protocols import ProtocolRules, unknown_protocol_message
from cebroker.api.admission.tables import AdmissionRules
from cebroker.subscription import PULL, WEBHOOK_SECRET, Subscription

log = logging.getLogger("cebroker.api")

#: Every top-level member a request may carry (``filter`` is the seeds' one-filter alias).
FIELDS = (
    "id",
    "source",
    "types",
    "config",
    "filters",
    "filter",
    "sink",
    "protocol",
    "protocolsettings",
    "sinkcredential",
)


def realize(
    body: Any, *, rules: AdmissionRules, subscription_id: str, path_id: str | None = None
) -> Subscription:
    """Validate ``body`` against ``rules`` and return the realized subscription (revision 1,
    defaults applied).

    ``path_id`` is the id in the URL of a replace; a body ``id`` must then equal it. On
    create, a body ``id`` is ignored (spec 3.2.1 ``id``: "MUST be ignored").

    Raises:
        cebroker.errors.ValidationError: with one entry per problem found.
    """
    problems = Problems()
    if not isinstance(body, dict):
        problems.add("", f"the subscription must be a JSON object, got {type_name(body)}")
        problems.check()
    for name in body:
        if name not in FIELDS:
            problems.add(child("", name), f"unknown field {quote(name)}; known fields: {', '.join(FIELDS)}")
    if path_id is not None and "id" in body and body["id"] != path_id:
        problems.add("/id", "must equal the id in the URL (or be left out)")

    protocol, protocol_rules = _protocol(body.get("protocol"), rules.protocols, problems)
    before = len(problems.items)
    if protocol == PULL:  # consumers receive the events themselves: nothing to connect to
        for name in ("sink", "sinkcredential"):
            if name in body:
                problems.add(f"/{name}", "must be left out for protocol PULL (consumers receive the events)")
        sink_parts = None
    else:
        sink_parts = _sink(body.get("sink"), protocol, protocol_rules, problems)
    settings = _settings(body.get("protocolsettings", {}), protocol, protocol_rules, sink_parts, problems)
    if protocol_rules is not None and len(problems.items) == before and protocol != PULL:
        check_deliverable(protocol, body["sink"], settings, problems)
    if "source" in body:
        checks.uri_reference(body["source"], "/source", problems)
    if "types" in body:
        _types(body["types"], problems)
    config = body.get("config", {})
    _config(config, rules.config_keys, problems)
    filters = _filters(body, problems)
    credential = validate_credential(body["sinkcredential"], problems) if "sinkcredential" in body else None

    problems.check()
    secret = settings.pop(WEBHOOK_SECRET, None)
    return Subscription(
        id=subscription_id,
        protocol=body["protocol"],
        sink=body.get("sink", ""),
        source=body.get("source"),
        types=tuple(body["types"]) if "types" in body else None,
        config=dict(config),
        filters=tuple(filters),
        protocolsettings=settings,
        sinkcredential=credential,
        webhook_secret=secret,
    )


def _protocol(
    value: Any, protocols: Mapping[str, ProtocolRules], problems: Problems
) -> tuple[str, ProtocolRules | None]:
    if value is None:
        problems.add("/protocol", f"is required: one of {', '.join(protocols)}")
    elif not isinstance(value, str):
        problems.add("/protocol", f"must be a string, got {type_name(value)}")
    elif value not in protocols:
        problems.add("/protocol", unknown_protocol_message(value, protocols))
    else:
        return value, protocols[value]
    return "", None


def _sink(value: Any, protocol: str, rules: ProtocolRules | None, problems: Problems) -> SplitResult | None:
    if value is None:
        problems.add("/sink", "is required: the URI to which events are delivered")
        return None
    if rules is None:  # the scheme cannot be judged without a valid protocol: check the form only
        checks.absolute_uri(value, "/sink", problems, None)
        return None
    schemes = ", ".join(sorted(rules.schemes))
    parts = checks.absolute_uri(
        value, "/sink", problems, rules.schemes, f"protocol {protocol} needs a sink scheme of {schemes}"
    )
    if parts is not None:
        rules.sink_check(parts, "/sink", problems)
        checks.no_userinfo(parts, "/sink", problems)
    return parts


def _settings(
    value: Any, protocol: str, rules: ProtocolRules | None, sink: SplitResult | None, problems: Problems
) -> dict[str, Any]:
    pointer = "/protocolsettings"
    if not isinstance(value, dict):
        problems.add(pointer, f"must be an object, got {type_name(value)}")
        return {}
    if rules is None:
        return dict(value)
    # Setting names match case-insensitively (the upstream OpenAPI file spells AMQP's
    # ``linkName``, the prose spec ``linkname``); the realized subscription holds the declared
    # lower-case name. Two spellings of one setting in one body are refused.
    declared = {name.lower(): name for name in (*rules.settings, *rules.refused)}
    realized: dict[str, Any] = {}
    for given, item in value.items():
        at = child(pointer, given)
        name: str = declared.get(str(given).lower(), str(given))
        if name in realized:
            problems.add(at, f"gives the setting {quote(name)} a second time (names match in any case)")
        elif name in rules.settings:
            _guarded(rules.settings[name], item, at, problems)
        elif name in rules.refused:
            problems.add(at, rules.refused[name])
        else:
            known = ", ".join(sorted(rules.settings))
            problems.add(at, f"unknown setting {quote(given)} for {protocol}; known settings: {known}")
        realized.setdefault(name, item)
    for name in sorted(rules.required - realized.keys()):
        problems.add(child(pointer, name), f"is required for protocol {protocol}")
    for cross_check in rules.cross_checks:
        cross_check(realized, sink, pointer, problems)
    return {**rules.defaults, **realized}


def _guarded(check: Check, value: Any, pointer: str, problems: Problems) -> None:
    """Run a check that may have been declared by another part of the broker: a bug in it is
    logged and reported as a problem with the field, never a 500."""
    try:
        check(value, pointer, problems)
    except Exception:
        log.exception("the check of %s failed", pointer)
        problems.add(pointer, "could not be checked")


def _types(value: Any, problems: Problems) -> None:
    if not isinstance(value, list):
        problems.add("/types", f"must be an array of strings, got {type_name(value)}")
    elif not value:
        problems.add("/types", "must not be empty (leave it out to receive every type)")
    else:
        for i, item in enumerate(value):
            checks.string(item, child("/types", i), problems)


def _config(value: Any, config_keys: Mapping[str, Check], problems: Problems) -> None:
    if not isinstance(value, dict):
        problems.add("/config", f"must be an object, got {type_name(value)}")
        return
    for key, item in value.items():
        if not key:
            problems.add(child("/config", key), "keys must not be empty")
        elif key in config_keys:
            _guarded(config_keys[key], item, child("/config", key), problems)


def _filters(body: dict[str, Any], problems: Problems) -> list[dict[str, Any]]:
    """The filters array; ``filter`` (one object) is accepted as an alias of a one-element array."""
    if "filter" in body:
        if "filters" in body:
            problems.add("/filter", "give either 'filters' (an array) or 'filter' (one filter), not both")
            return []
        return _compile([body["filter"]], lambda _: "/filter", problems)
    value = body.get("filters", [])
    if not isinstance(value, list):
        problems.add("/filters", f"must be an array of filter expressions, got {type_name(value)}")
        return []
    return _compile(value, lambda i: child("/filters", i), problems)


def _compile(filters: list[Any], base: Callable[[int], str], problems: Problems) -> list[dict[str, Any]]:
    # One compile per filter so that a problem in each of them is reported, not only the first.
    for i, expression in enumerate(filters):
        try:
            cefilters.compile([expression])
        except cefilters.FilterError as exc:
            problems.add(base(i) + exc.path.removeprefix("/0"), exc.message)
        except RecursionError:
            problems.add(base(i), "is nested too deeply")
        except Exception:  # a bug in the engine must not become a 500 for the client
            log.exception("the filter engine failed on filter %d", i)
            problems.add(base(i), "could not be compiled by the filter engine")
    return [dict(f) if isinstance(f, dict) else f for f in filters]

"""``sinkcredential``: the three credential types of the Subscriptions API and their fields.

Field names follow the spec's prose (section 3.2.3): ``identifier`` and ``refreshtokenendpoint``.
The names ``identity`` and ``refreshtokenurl`` are accepted as aliases. The realized subscription
keeps the spelling the client used (a client gets back what it sent); giving both spellings of
one field is an error. Delivery reads either spelling through
:func:`ceprotocols.credentials.canonical_credential`, which holds the one alias table.

Secret fields (``secret``, ``accesstoken``, ``refreshtoken``) are checked for type only and are
never quoted in a message: error messages name the field, not its value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ceprotocols.credentials import CREDENTIAL_ALIASES

from cebroker.api.admission import checks
from cebroker.api.admission.checks import Check
from cebroker.api.admission.problems import Problems, child, quote, type_name

POINTER = "/sinkcredential"


def _http_url(value: Any, pointer: str, problems: Problems) -> None:
    parts = checks.absolute_uri(value, pointer, problems, ("http", "https"))
    if parts is not None:
        checks.host_and_port(parts, pointer, problems)
        checks.no_userinfo(parts, pointer, problems)


@dataclass(frozen=True, kw_only=True)
class CredentialRules:
    """The fields of one credential type; every field is required (as the spec says)."""

    fields: dict[str, Check]


_ACCESS: dict[str, Check] = {
    "accesstoken": checks.check_string,
    "accesstokenexpiresutc": checks.timestamp,
    "accesstokentype": checks.check_string,
}

#: Registry: credential type -> its rules.
CREDENTIAL_TYPES: dict[str, CredentialRules] = {
    "PLAIN": CredentialRules(fields={"identifier": checks.check_string, "secret": checks.check_string}),
    "ACCESSTOKEN": CredentialRules(fields=dict(_ACCESS)),
    "REFRESHTOKEN": CredentialRules(
        fields={**_ACCESS, "refreshtoken": checks.check_string, "refreshtokenendpoint": _http_url}
    ),
}


def validate_credential(value: Any, problems: Problems) -> dict[str, Any] | None:
    """The credential as it will be stored (secrets included), or None if it is invalid."""
    if not isinstance(value, dict):
        problems.add(POINTER, f"must be an object, got {type_name(value)}")
        return None
    before = len(problems.items)
    kind = value.get("credentialtype")
    at = child(POINTER, "credentialtype")
    if kind is None:
        problems.add(at, f"is required: one of {', '.join(CREDENTIAL_TYPES)}")
        return None
    rules = CREDENTIAL_TYPES.get(kind) if isinstance(kind, str) else None
    if rules is None:
        hint = (
            f"credential types are case-sensitive: use {kind.upper()!r}"
            if (isinstance(kind, str) and kind.upper() in CREDENTIAL_TYPES)
            else f"must be one of {', '.join(CREDENTIAL_TYPES)}"
        )
        problems.add(at, hint)
        return None
    realized: dict[str, Any] = {"credentialtype": kind}
    present: set[str] = set()  # canonical names of the fields given, whichever the spelling
    for given, item in value.items():
        if given == "credentialtype":
            continue
        name = CREDENTIAL_ALIASES.get(given, given)
        if name != given and name in value:
            problems.add(child(POINTER, given), f"give either {name!r} or its alias {given!r}, not both")
            continue
        check = rules.fields.get(name)
        if check is None:
            known = ", ".join(rules.fields)
            problems.add(
                child(POINTER, given),
                f"unknown field {quote(given)} for credentialtype {kind}; known: {known}",
            )
        else:
            check(item, child(POINTER, given), problems)
            realized[given] = item
            present.add(name)
    for required in rules.fields:
        if required not in present:
            problems.add(child(POINTER, required), f"is required for credentialtype {kind}")
    return realized if len(problems.items) == before else None

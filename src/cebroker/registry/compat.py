"""Older spellings accepted on input and rewritten to the stored 1.0-rc2 form.

* Message Definitions 0.5-wip: ``basemessageurl``, ``schemaformat``, ``schema`` and
  ``schemauri`` on a message become ``basemessage``, ``dataschemaformat``, ``dataschema`` and
  ``dataschemauri``.
* The later ``model.json`` spelling ``basemessageuri`` also becomes ``basemessage``.
* A CloudEvents ``envelopemetadata`` wrapped in ``attributes`` (one sentence of the spec and
  one example do this) is unwrapped to the flat map the model, the samples and the code
  generators use.

Both spellings of one attribute in the same body are refused (``invalid_attribute``) rather
than silently picking one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cebroker.registry.errors import XRegistryError

#: old spelling -> stored spelling, for message definitions
MESSAGE_RENAMES: dict[str, str] = {
    "basemessageurl": "basemessage",
    "basemessageuri": "basemessage",
    "schemaformat": "dataschemaformat",
    "schema": "dataschema",
    "schemauri": "dataschemauri",
}


def upgrade_message(body: Mapping[str, Any], subject: str) -> dict[str, Any]:
    """A message definition body in the stored spelling."""
    out: dict[str, Any] = {}
    renamed: dict[str, str] = {}
    for key, value in body.items():
        new = MESSAGE_RENAMES.get(key, key)
        if new in out:
            raise XRegistryError(
                "invalid_attribute",
                subject,
                name=new,
                error_detail=f"given twice (as {renamed.get(new, new)!r} and {key!r})",
            )
        out[new] = value
        renamed[new] = key
    meta = out.get("envelopemetadata")
    if isinstance(meta, dict) and set(meta) == {"attributes"} and isinstance(meta["attributes"], dict):
        out["envelopemetadata"] = dict(meta["attributes"])
    return out

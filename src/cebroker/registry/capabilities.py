"""What ``GET /capabilities`` says this registry offers: flags, formats, policies, pagination."""

from __future__ import annotations

from typing import Any

from cebroker.registry.formats.compatibility import POLICIES
from cebroker.registry.model import SPEC_VERSION

#: the formats whose documents are checked (names match case-insensitively, any version suffix)
KNOWN_FORMATS = (
    "JsonSchema/draft-04",
    "JsonSchema/draft-06",
    "JsonSchema/draft-07",
    "JsonSchema/draft/2019-09",
    "JsonSchema/draft/2020-12",
    "Avro/1.12",
    "Protobuf/2",
    "Protobuf/3",
    "XSD/1.0",
    "XSD/1.1",
)

#: request flags this server implements (advertised in ``capabilities.flags``)
FLAGS = ["check", "doc", "epoch", "filter", "ignore", "inline", "setdefaultversionid", "sort", "specversion"]


def capabilities_document() -> dict[str, Any]:
    """What ``GET /capabilities`` returns: every supported feature, defaults included."""
    return {
        "apis": ["/capabilities", "/export", "/model", "/schema", "/messagedefinition"],
        "available": {
            "capabilities": {"mutable": False},
            "entities": {"mutable": True},
            "export": {"mutable": False},
            "model": {"mutable": False},
            "modelsource": {"mutable": False},
        },
        # the policies enforced per format (XSD documents are checked, without compatibility rules)
        "compatibilities": {name: list(POLICIES) for name in ("JsonSchema", "Avro", "Protobuf")},
        "flags": list(FLAGS),
        "formats": list(KNOWN_FORMATS),
        "ignores": ["defaultversionid", "defaultversionsticky", "epoch", "id", "readonly"],
        "pagination": True,
        "shortself": False,
        "specversions": [SPEC_VERSION],
        "versionmodes": ["manual"],
    }

"""The last check of a subscription: can its protocol's sender use this sink and these settings?

The API's own rules (:mod:`.protocols`) explain problems field by field; this asks the sender
library (``ceprotocols.check_destination``, no IO) so that nothing is accepted that every
delivery would then reject. It runs only when the API's rules found the sink and settings valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cefilters.errors import pointer_token
from ceprotocols import SettingsError, check_destination

from cebroker.api.admission.problems import Problems


def check_deliverable(protocol: str, sink: str, settings: Mapping[str, Any], problems: Problems) -> None:
    """Record a problem if the sender for ``protocol`` would refuse ``sink`` or ``settings``."""
    try:
        check_destination(protocol, sink, settings)
    except SettingsError as exc:
        pointer = "".join(f"/{pointer_token(part)}" for part in exc.field.split("."))
        if exc.field == "sink":
            # The sender's message quotes the URL, which may carry a password: not echoed.
            problems.add(pointer, f"the {protocol} sender cannot deliver to this sink")
        else:
            problems.add(pointer, f"{exc.reason} (for the {protocol} sender)")

"""How the dispatcher's parts log a failed read or write of the delivery log.

A storage outage is logged once per episode by the storage's health, so here it is only a
debug line without a traceback (a full disk would otherwise log one traceback per delivery);
anything else is unexpected and logged with its traceback.
"""

from __future__ import annotations

import logging
import sys

from cebroker.storage.errors import StorageUnavailable

log = logging.getLogger("cebroker.pipeline")


def log_failure(message: str, *args: object) -> None:
    """Log the exception being handled, as the module docstring says."""
    exc = sys.exc_info()[1]
    if isinstance(exc, StorageUnavailable):
        log.debug(message + ": %s", *args, exc)
    else:
        log.exception(message, *args)

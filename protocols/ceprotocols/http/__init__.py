"""CloudEvents over HTTP: the pure binding and the push-delivery sender."""

from ceprotocols.http.binding import (
    BATCH_CONTENT_TYPE,
    STRUCTURED_CONTENT_TYPE,
    from_batch,
    from_binary,
    from_structured,
    to_batch,
    to_binary,
    to_structured,
)
from ceprotocols.http.sender import HttpSender, parse_retry_after

__all__ = [
    "BATCH_CONTENT_TYPE",
    "STRUCTURED_CONTENT_TYPE",
    "HttpSender",
    "from_batch",
    "from_binary",
    "from_structured",
    "parse_retry_after",
    "to_batch",
    "to_binary",
    "to_structured",
]

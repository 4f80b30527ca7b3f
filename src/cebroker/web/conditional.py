"""``If-Match`` (RFC 9110 section 13.1.1): ``*`` or a list of entity tags, compared strongly."""

from __future__ import annotations

import re

from cebroker.errors import PreconditionFailed
from cebroker.web.problem import request_error

_ETAG_LIST = re.compile(
    r'\s*(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"\s*(?:,\s*(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"\s*)*'
)
_ETAG = re.compile(r'(W/)?("[^"]*")')


def check_if_match(header: str | None, current_etag: str) -> bool:
    """Whether ``If-Match`` pins the current representation.

    Returns True when the header lists ``current_etag`` (the write must then be conditional on
    the revision it names), False when there is no header or it is ``*`` (any current
    representation will do). Raises :class:`PreconditionFailed` when no listed tag matches:
    weak tags never match (strong comparison), and a 400 when the header is malformed.
    """
    if header is None or header.strip() == "*":
        return False
    if not _ETAG_LIST.fullmatch(header):
        raise request_error("header", "If-Match", 'must be * or a list of entity tags like "abc-1"')
    strong = [tag for weak, tag in _ETAG.findall(header) if not weak]
    if current_etag not in strong:
        raise PreconditionFailed("If-Match does not match the current ETag of the subscription")
    return True

"""The registry's JSON answers, encoded a small piece at a time.

Each piece holds the interpreter lock only briefly, so a thread encoding a large answer does not
keep the event loop from serving other requests; a
:class:`~cebroker.registry.views.Deferred` collection (the registry's groups, for ``/export``
and ``/?inline=*``) is rendered group by group as the encoding reaches it, so a large registry
is never held rendered whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from cebroker.registry.views import Deferred

#: Containers nested up to this depth are written piece by piece; deeper values (a schema
#: document, a message's metadata) are encoded whole.
_CHUNK_DEPTH = 8
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
#: bytes of JSON text sent per piece of a streamed answer
_PIECE = 256 * 1024


def _chunks(value: Any, depth: int) -> Iterator[str]:
    if isinstance(value, Deferred):
        yield "{"
        for n, (key, render) in enumerate(value.entries):
            yield ("," if n else "") + _encode(str(key)) + ":"
            yield from _chunks(render(), depth + 1)
        yield "}"
        return
    if depth >= _CHUNK_DEPTH or not isinstance(value, (dict, list)) or not value:
        yield _encode(value)
        return
    if isinstance(value, dict):
        yield "{"
        for n, (key, item) in enumerate(value.items()):
            yield ("," if n else "") + _encode(str(key)) + ":"
            yield from _chunks(item, depth + 1)
        yield "}"
        return
    yield "["
    for n, item in enumerate(value):
        if n:
            yield ","
        yield from _chunks(item, depth + 1)
    yield "]"


def encode_json(body: Any) -> bytes:
    """``body`` as compact JSON, encoded one small piece at a time: each piece holds the
    interpreter lock only briefly, so a thread encoding a large answer (``/export`` of a big
    registry) does not keep the event loop from serving other requests."""
    return "".join(_chunks(body, 0)).encode("utf-8", "backslashreplace")


def pieces(body: Any) -> Iterator[bytes]:
    """``body`` as compact JSON in pieces of about 256 KiB, rendering each
    :class:`~cebroker.registry.views.Deferred` collection as it comes."""
    buffer: list[str] = []
    size = 0
    for chunk in _chunks(body, 0):
        buffer.append(chunk)
        size += len(chunk)
        if size >= _PIECE:
            yield "".join(buffer).encode("utf-8", "backslashreplace")
            buffer, size = [], 0
    yield "".join(buffer).encode("utf-8", "backslashreplace")

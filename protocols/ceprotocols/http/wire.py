"""HTTP/1.1 requests as bytes (RFC 9112), pure: the request line, the header section and
where a request goes, from a URL, the method and the caller's headers. No IO here.

The request's framing is the transport's: it writes ``Host`` and ``User-Agent`` (unless the
caller gives them) and ``Content-Length`` (the body is always whole bytes), and refuses a
caller's ``Content-Length`` or ``Transfer-Encoding`` rather than send a message whose framing
the caller could falsify. A header name must be a token and a value must not hold a control
character other than a tab (CR, LF and NUL above all: they would end the header, or the head,
early), nor may the method or the request target; anything else is refused with
:class:`RequestError` before a byte is sent.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass

from yarl import URL

__all__ = ["RequestError", "Target", "request_head", "target_of"]

#: RFC 9110 5.6.2: a token (method and header names).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: RFC 9110 5.5: a field value's characters (visible ASCII, space, tab, and obs-text).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
#: The same but for CR and LF, which a head's lines end with (they are counted instead).
_CONTROL_BUT_LINES = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: Header names the transport writes itself (lower case).
_FRAMING = frozenset({"content-length", "transfer-encoding"})
#: What in the caller's header names (lower case, run together) asks for a closer look: those
#: names, and those whose own field a caller's replaces.
_SPECIAL = re.compile("content-length|transfer-encoding|host|user-agent")
#: The ``User-Agent`` field, unless the caller gives one.
_AGENT = "User-Agent: ceprotocols\r\n"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class RequestError(ValueError):
    """The request cannot be written (a URL that is not usable, a header that is not)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a URL's requests go, read once per URL.

    Attributes:
        tls: whether the connection is ``https``.
        host: the host to connect to and to name in TLS (SNI and the certificate check).
        port: the port to connect to.
        path: the request target (origin form: the path and query as the URL spells them).
        authority: the ``Host`` header's value (the port only when it is not the scheme's).
        authorization: ``Basic`` credentials from the URL's user information (a stored
            subscription may still carry one: see docs/security.md), else None.
    """

    tls: bool
    host: str
    port: int
    path: str
    authority: str
    authorization: str | None


def target_of(url: str) -> Target:
    """The :class:`Target` of an ``http``/``https`` URL; raises :class:`RequestError` for any
    other (its message quotes the URL as given: redact it before it is shown or stored)."""
    try:
        parsed = URL(url)
        host = parsed.raw_host
        port = parsed.port
    except (ValueError, TypeError) as exc:
        raise RequestError(f"not a usable http(s) URL: {url} ({exc})") from exc
    scheme = parsed.scheme
    if scheme not in _DEFAULT_PORTS or not host or port is None:
        raise RequestError(f"not a usable http(s) URL: {url}")
    authority = f"[{host}]" if ":" in host else host
    if port != _DEFAULT_PORTS[scheme]:
        authority = f"{authority}:{port}"
    authorization = None
    if parsed.raw_user is not None:
        pair = f"{parsed.user or ''}:{parsed.password or ''}".encode()
        authorization = "Basic " + base64.b64encode(pair).decode("ascii")
    path = parsed.raw_path_qs or "/"
    if _CONTROL.search(path) or " " in path:
        raise RequestError(f"not a usable http(s) URL: {url}")
    return Target(scheme == "https", host, port, path, authority, authorization)


def request_head(method: str, target: Target, headers: Mapping[str, str], length: int) -> bytes:
    """The request line and header section (ending with the empty line) of a request with a
    body of ``length`` bytes; raises :class:`RequestError` for a method, header name or value
    that may not be sent (see the module)."""
    if method == "HEAD":  # its answer's length would not frame a body: see .connection
        raise RequestError("HEAD is not sent by this transport")
    # Checked together (this runs for every delivery): the method and the names are tokens
    # exactly when their concatenation is one.
    names = method + "".join(headers)
    if _TOKEN.fullmatch(names) is None:
        if _CONTROL.search(names) is not None:
            raise RequestError("a header name holds a control character (RFC 9110 5.5)")
        raise RequestError(f"a header name or the method {method!r} is not a token (RFC 9110 5.6.2)")
    # The transport's own fields, each unless the caller gives it (a caller's name is looked
    # at one by one only when the names run together mention one of them).
    host = agent = True
    authorization = target.authorization
    if authorization is not None or _SPECIAL.search(names.lower()) is not None:
        for name in headers:
            low = name.lower()
            if low in _FRAMING:
                raise RequestError(f"{name} is written by the transport, not given by the caller")
            host = host and low != "host"
            agent = agent and low != "user-agent"
            if low == "authorization":
                authorization = None
    lines = [method, " ", target.path, " HTTP/1.1\r\n"]
    for name, value in headers.items():
        lines += (name, ": ", value, "\r\n")
    count = len(headers) + 3  # the request line, Content-Length and the empty line
    if host:
        lines += ("Host: ", target.authority, "\r\n")
        count += 1
    if agent:
        lines.append(_AGENT)
        count += 1
    if authorization is not None:
        lines += ("Authorization: ", authorization, "\r\n")
        count += 1
    lines += ("Content-Length: ", str(length), "\r\n\r\n")
    text = "".join(lines)
    # A value's CR or LF would add a line: the head holds exactly one of each per line.
    if _CONTROL_BUT_LINES.search(text) is not None or text.count("\n") != count or text.count("\r") != count:
        raise RequestError("a header value holds a control character (RFC 9110 5.5)")
    return text.encode()

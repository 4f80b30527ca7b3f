"""Sink and source URLs: ``scheme://[user:password@]host[:port][,host:port...][/path][?query]``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from ceprotocols.errors import DeliveryRejected, SettingsError

TLS_SCHEMES = frozenset({"mqtts", "wss", "amqps", "kafkas", "tls"})
#: The user information of a URL within text: up to the last ``@`` before the URL's path,
#: query, fragment or the end of the URL (a space or a quote), so that an ``@`` in a password
#: does not leave its end behind.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#\"'<>]*@")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A parsed sink or source URL. ``hosts`` holds every ``(host, port)`` of a comma list."""

    scheme: str
    hosts: tuple[tuple[str, int], ...]
    path: str = ""
    query: tuple[tuple[str, str], ...] = field(default=())
    username: str | None = None
    password: str | None = None

    @property
    def host(self) -> str:
        """The first host."""
        return self.hosts[0][0]

    @property
    def port(self) -> int:
        """The first port."""
        return self.hosts[0][1]

    @property
    def tls(self) -> bool:
        """Whether the scheme asks for TLS (``mqtts``, ``amqps``, ``kafkas``, ``tls``...)."""
        return self.scheme in TLS_SCHEMES

    def option(self, name: str, default: str | None = None) -> str | None:
        """The last query parameter ``name``."""
        values = [value for key, value in self.query if key == name]
        return values[-1] if values else default


class EndpointError(ValueError):
    """A URL that is not a valid endpoint for its protocol."""


def parse_endpoint(url: str, *, schemes: dict[str, int]) -> Endpoint:
    """Parse ``url``; ``schemes`` maps each accepted scheme to its default port. Raises
    EndpointError naming what is wrong."""
    shown = redact_text(url)  # messages never quote the user information
    try:
        parts = urlsplit(url, allow_fragments=False)  # "#" is an MQTT wildcard, not a fragment
    except ValueError as exc:
        raise EndpointError(f"{shown!r} is not a URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise EndpointError(f"{shown!r}: scheme must be one of {', '.join(sorted(schemes))}")
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if not netloc:
        raise EndpointError(f"{shown!r} has no host")
    hosts = tuple(_host_port(shown, item, schemes[scheme]) for item in netloc.split(","))
    return Endpoint(
        scheme=scheme,
        hosts=hosts,
        path=unquote(parts.path),
        query=tuple(parse_qsl(parts.query, keep_blank_values=True)),
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
    )


def redact(url: str) -> str:
    """``url`` without its user information (which may hold a password or a token), for logs
    and labels."""
    try:
        parts = urlsplit(url, allow_fragments=False)
    except ValueError:
        return url.split("://", 1)[0] + "://(unparsable URL)"
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]).geturl()


def redact_text(text: str) -> str:
    """``text`` (an error message, say) with the user information of every URL in it, a user
    name as well as a password, replaced by ``***``."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}***@", text)


def _host_port(url: str, item: str, default_port: int) -> tuple[str, int]:
    if item.startswith("["):  # [IPv6]:port
        host, _, rest = item[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif item.count(":") == 1:
        host, port_text = item.split(":")
    else:
        host, port_text = item, ""
    try:
        port = int(port_text) if port_text else default_port
    except ValueError as exc:
        raise EndpointError(f"{url!r}: port {port_text!r} is not a number") from exc
    if not host or not 0 < port < 65536:
        raise EndpointError(f"{url!r}: invalid host or port in {item!r}")
    return host, port


def sink_endpoint(url: str, *, schemes: dict[str, int]) -> Endpoint:
    """:func:`parse_endpoint` for a subscription's sink: a bad sink rejects the delivery."""
    try:
        return parse_endpoint(url, schemes=schemes)
    except EndpointError as exc:
        raise DeliveryRejected(f"sink: {exc}", retryable=False, status="sink") from exc


def checked_sink(url: str, *, schemes: dict[str, int]) -> Endpoint:
    """:func:`parse_endpoint` for a sink being validated: a bad sink is a ``SettingsError`` on
    the ``sink`` member."""
    try:
        return parse_endpoint(url, schemes=schemes)
    except EndpointError as exc:
        raise SettingsError("sink", str(exc)) from exc

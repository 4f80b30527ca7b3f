"""Broker settings: one frozen object, and the one declaration of every ``cebroker serve`` setting.

Each field below is a setting (see :mod:`cebroker.options`): its name gives the flag
(``--max-event-size``) and the variable (``CEBROKER_MAX_EVENT_SIZE``), its kind the type and
limits that both are checked against. Settings built in code are checked the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cebroker.options import (
    Boolean,
    Choice,
    Database,
    Duration,
    FilePath,
    HttpUrl,
    Integer,
    Kind,
    Many,
    Size,
    Text,
    check_declared,
    setting,
)

#: Prefix of every ``serve`` setting's environment variable.
VARIABLE_PREFIX = "CEBROKER_"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
LOG_FORMATS = ("text", "json")


@dataclass(frozen=True)
class SourceUrl(Kind[str]):
    """A URL a protocol receiver can be built for (scheme known, client library installed).

    Only text read from a flag or variable is tried this way; the sources component builds the
    receivers again when it starts, and refuses a bad URL given in code there.
    """

    @property
    def metavar(self) -> str:
        return "URL"

    def convert(self, text: str) -> str:
        from ceprotocols.errors import SettingsError
        from ceprotocols.sources import create_receiver

        try:
            create_receiver(text)  # builds the receiver only: no connection yet
        except SettingsError as exc:
            raise ValueError(exc.reason) from exc
        except ImportError as exc:  # the protocol's client library is not installed
            raise ValueError(str(exc)) from exc
        return text


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything the service needs to start. Defaults are the embedded single-process setup."""

    host: str = setting("127.0.0.1", Text(), "address to bind", metavar="HOST")
    port: int = setting(8080, Integer(0, 65535), "TCP port", metavar="PORT")
    db: str | Path = setting(
        "cebroker.db",
        Database(),
        "SQLite database file (created on first start) or postgresql://user:password@host:port/dbname",
    )
    log_level: str = setting("info", Choice(LOG_LEVELS), "log level")
    log_format: str = setting(
        "text", Choice(LOG_FORMATS), "log lines as text, or one JSON object per line for log shippers"
    )
    access_log: bool = setting(False, Boolean(), "log every HTTP request (uvicorn's access log)")
    #: The server's event loop and HTTP parser; ``auto`` takes uvloop and httptools (the
    #: ``uvicorn[standard]`` extras, installed by default) when present.
    loop: str = setting(
        "auto", Choice(("auto", "asyncio", "uvloop")), "event loop: auto uses uvloop if installed"
    )
    http: str = setting(
        "auto", Choice(("auto", "h11", "httptools")), "HTTP/1.1 parser: auto uses httptools if installed"
    )
    #: Public base URL of this broker (for Location headers, registry ``self`` links, webhook
    #: origin); derived from host and port when not set.
    base_url: str | None = setting(
        None,
        HttpUrl(),
        "public base URL of this broker, if not http://HOST:PORT",
        default_text="http://HOST:PORT",
    )
    max_subscription_body: int = setting(64 * 1024, Size(), "largest subscription request body")
    max_event_size: int = setting(1024 * 1024, Size(), "largest event; larger gets 413")
    max_batch_size: int = setting(16 * 1024 * 1024, Size(), "largest batch request body")
    dedup_window: float = setting(
        600.0, Duration(), "how long a repeated (source, id) is acknowledged but not delivered again"
    )
    max_backlog: int = setting(
        1_000_000, Integer(minimum=1), "pending deliveries above which ingress answers 503 with Retry-After"
    )
    #: The archive (``cebroker.storage.archive``): how long every accepted event is kept for
    #: replays and subscriptions that start in the past, and the size it may grow to.
    retention: float = setting(
        86_400.0,
        Duration(),
        "how long every accepted event is kept for replays (0: only until delivered)",
        default_text="24h",
    )
    retention_bytes: int | None = setting(
        None, Size(), "largest archive (the events' JSON); past it the oldest events go first"
    )
    webhook_validation: bool = setting(
        True, Boolean(), "CloudEvents webhook validation handshake before HTTP delivery"
    )
    event_validation: str = setting(
        "off", Choice(("off", "warn", "enforce")), "check incoming events against registry definitions"
    )
    #: JSON Schema of registry documents (e.g. the spec's CloudEvents registry document schema)
    #: applied to imports; the registry's built-in rules apply either way.
    registry_document_schema: Path | None = setting(
        None, FilePath(must_exist=True), "JSON Schema applied to registry imports"
    )
    #: Protocol ingress: URLs consumed continuously into the ingest path (``mqtt://``, ``kafka://``,
    #: ``nats://``, ``amqp://``; see the protocols documentation).
    sources: tuple[str, ...] = setting(
        (),
        Many(SourceUrl()),
        "consume CloudEvents from this URL (mqtt://, kafka://, nats://, amqp://); repeatable, "
        "the variable takes several separated by spaces",
        flag="--source",
    )

    #: Shared databases (PostgreSQL): how long an instance that stopped renewing its heartbeat
    #: keeps the deliveries it claimed before the other instances take them over.
    instance_lease: float = setting(
        10.0,
        Duration(minimum=1.0),
        "with several instances on one PostgreSQL database: how long the deliveries claimed by an "
        "instance that stopped its heartbeat wait before the others take them over",
    )

    def __post_init__(self) -> None:
        check_declared(self)

    @property
    def public_url(self) -> str:
        """The base URL clients use to reach this broker, without a trailing slash."""
        if self.base_url:
            return self.base_url.rstrip("/")
        return f"http://{self.host}:{self.port}"

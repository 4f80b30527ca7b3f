"""Broker settings: one frozen object, built by the CLI from flags and ``CEBROKER_*`` variables."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything the service needs to start. Defaults are the embedded single-process setup."""

    host: str = "127.0.0.1"
    port: int = 8080
    db: Path = field(default_factory=lambda: Path("cebroker.db"))
    log_level: str = "info"
    #: Public base URL of this broker (for Location headers, registry ``self`` links, webhook
    #: origin); derived from host and port when not set.
    base_url: str | None = None
    #: Largest accepted subscription request body, in bytes.
    max_subscription_body: int = 64 * 1024
    #: Event pipeline: largest single event and largest batch request body, in bytes.
    max_event_size: int = 1024 * 1024
    max_batch_size: int = 16 * 1024 * 1024
    #: Seconds within which a repeated (source, id) is acknowledged but not delivered again.
    dedup_window: float = 600.0
    #: Pending deliveries above which ingress answers 503 with Retry-After.
    max_backlog: int = 1_000_000
    #: Run the CloudEvents webhook validation handshake before delivering to an HTTP sink.
    webhook_validation: bool = True
    #: Registry check of incoming events: off, warn or enforce.
    event_validation: str = "off"
    #: JSON Schema of registry documents (e.g. the spec's CloudEvents registry document schema)
    #: applied to imports; the registry's built-in rules apply either way.
    registry_document_schema: Path | None = None
    #: Protocol ingress: URLs consumed continuously into the ingest path (``mqtt://``, ``kafka://``,
    #: ``nats://``, ``amqp://``; see the protocols documentation).
    sources: tuple[str, ...] = ()

    @property
    def public_url(self) -> str:
        """The base URL clients use to reach this broker, without a trailing slash."""
        if self.base_url:
            return self.base_url.rstrip("/")
        return f"http://{self.host}:{self.port}"

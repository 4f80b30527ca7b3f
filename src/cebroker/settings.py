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

    @property
    def public_url(self) -> str:
        """The base URL clients use to reach this broker, without a trailing slash."""
        if self.base_url:
            return self.base_url.rstrip("/")
        return f"http://{self.host}:{self.port}"

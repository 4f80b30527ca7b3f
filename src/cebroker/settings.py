"""Broker settings: one frozen object, and the one declaration of every ``cebroker serve`` setting.

Each field below is a setting (see :mod:`cebroker.options`): its name gives the flag
(``--max-event-size``) and the variable (``CEBROKER_MAX_EVENT_SIZE``), its kind the type and
limits that both are checked against. Settings built in code are checked the same way.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

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
    Ratio,
    Size,
    Text,
    check_declared,
    setting,
)

#: Prefix of every ``serve`` setting's environment variable.
VARIABLE_PREFIX = "CEBROKER_"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
LOG_FORMATS = ("text", "json")
#: OTLP protocols the broker exports with (the OpenTelemetry OTLP/HTTP protobuf exporter).
OTLP_PROTOCOLS = ("http/protobuf",)
#: The standard OpenTelemetry samplers (``OTEL_TRACES_SAMPLER``).
SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)


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


@dataclass(frozen=True)
class Networks(Kind[tuple[str, ...]]):
    """Networks in CIDR notation, separated by commas (``10.20.0.0/16,fd00:1::/64``)."""

    takes_list: ClassVar[bool] = True

    @property
    def metavar(self) -> str:
        return "CIDR,..."

    def convert(self, text: str) -> tuple[str, ...]:
        return tuple(item.strip() for item in text.split(",") if item.strip())

    def parse_items(self, items: Sequence[str]) -> tuple[str, ...]:
        value = tuple(item.strip() for item in items)
        self.check(value)
        return value

    def check(self, value: tuple[str, ...]) -> None:
        for item in value:
            try:
                ipaddress.ip_network(item)
            except ValueError as exc:
                raise ValueError(f"{item!r} is not a network in CIDR notation: {exc}") from None

    def show(self, value: tuple[str, ...]) -> str:
        return ",".join(value) if value else "none"


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class SecretPairs(Kind[str]):
    """``key=value,...`` pairs that may hold credentials (OTLP headers): checked for their form,
    never shown or repeated in a message."""

    @property
    def metavar(self) -> str:
        return "KEY=VALUE,..."

    def convert(self, text: str) -> str:
        return text.strip()

    def check(self, value: str) -> None:
        for number, item in enumerate(value.split(","), start=1):
            if item.strip() and (not item.partition("=")[1] or not item.partition("=")[0].strip()):
                raise ValueError(f"item {number} is not key=value")

    def show(self, value: str) -> str:
        return "(set)"

    def redact(self, text: str) -> str:
        # The keys may be shown (they say what is wrong); the values are the secrets.
        return ",".join(
            f"{key}=***" if sep else key for key, sep, _ in (item.partition("=") for item in text.split(","))
        )


@dataclass(frozen=True)
class IssuerUrl(Kind[str]):
    """An OIDC issuer: an ``https://`` URL, or ``http://`` on a loopback host (tests, a local
    identity provider): tokens and keys must not travel in clear over a network."""

    @property
    def metavar(self) -> str:
        return "URL"

    def convert(self, text: str) -> str:
        return text.strip()

    def check(self, value: str) -> None:
        parts = urlsplit(value)
        if not parts.hostname or parts.scheme.lower() not in ("http", "https"):
            raise ValueError("not an absolute https:// URL")
        if parts.scheme.lower() == "http" and not is_loopback_host(parts.hostname):
            raise ValueError("an issuer must be https:// (http:// only on a loopback address)")


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
    #: Request heads, checked by the HTTP server before any route or authentication runs
    #: (``cebroker.web.heads``; docs/limits.md).
    max_header_size: int = setting(
        32 * 1024,
        Size(minimum=1024),
        "largest request head (request line and header fields); larger gets 431",
    )
    max_header_count: int = setting(
        100, Integer(minimum=1, maximum=10_000), "most header fields of a request; more gets 431"
    )
    max_url_length: int = setting(
        8 * 1024, Size(minimum=256), "longest request target (path and query); longer gets 414"
    )
    header_timeout: float = setting(
        10.0,
        Duration(positive=True),
        "how long a request head may take to arrive; then 408 and the connection is closed",
    )
    dedup_window: float = setting(
        600.0, Duration(), "how long a repeated (source, id) is acknowledged but not delivered again"
    )
    max_backlog: int = setting(
        1_000_000, Integer(minimum=1), "pending deliveries above which ingress answers 503 with Retry-After"
    )
    #: Replies (``config.reply: publish``, docs/replies.md): a reply whose chain of replies
    #: would grow past this many hops (``cebrokerhops``) is not published, and the delivery that
    #: produced it is dead-lettered with that reason.
    reply_max_hops: int = setting(
        8,
        Integer(minimum=1, maximum=1000),
        "longest chain of sink replies before a delivery is dead-lettered",
    )
    #: Request-reply (``POST /events`` with ``Prefer: wait``): a longer wait asked for is cut
    #: to this (``Preference-Applied`` says the wait applied).
    reply_max_wait: float = setting(
        30.0,
        Duration(positive=True),
        "longest wait of POST /events with Prefer: wait for a reply",
    )
    #: Broker events (docs/broker-events.md): CloudEvents of type ``dev.cebroker.*`` about the
    #: broker itself (circuits, dead letters, subscription changes), published into itself.
    #: Off by default: once on, every subscription without filters receives them too (its own
    #: tenant's), a change of what existing subscriptions get that operators choose.
    broker_events: bool = setting(False, Boolean(), "publish the broker's own events (dev.cebroker.* types)")
    #: A subscription's ``config.probemaxdelay`` overrides it.
    probe_max_delay: float = setting(
        10.0,
        Duration(positive=True),
        "longest wait between two probes of a sink whose circuit is open (its Retry-After may ask longer)",
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
    #: Replays still scanning the archive, at once (each reads its whole range): 429 above.
    max_replays_per_subscription: int = setting(
        2, Integer(minimum=1), "replays of one subscription still scanning the archive at once; 429 above"
    )
    max_replays_per_tenant: int = setting(
        8, Integer(minimum=1), "replays of one tenant's subscriptions still scanning at once; 429 above"
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
    #: On SIGTERM (docs/deploy.md): readiness turns 503, no new connection is accepted, and the
    #: deliveries being attempted get this long to finish before they are cancelled; what the
    #: instance still holds is then freed for the other instances (or stays pending in the log).
    shutdown_grace: float = setting(
        10.0,
        Duration(),
        "on SIGTERM: how long requests and deliveries in flight may take to finish before the "
        "instance stops (and hands the rest over)",
    )
    # -- security (docs/security.md) -----------------------------------------------------------
    api_keys: Path | None = setting(
        None,
        FilePath(must_exist=True),
        "JSON file of API keys (SHA-256 hashes, tenants, scopes); re-read on SIGHUP or change",
    )
    oidc_issuer: str | None = setting(
        None, IssuerUrl(), "accept RS256/ES256 bearer tokens of this OIDC issuer (https://)"
    )
    oidc_audience: str | None = setting(None, Text(), "the audience (aud) OIDC tokens must be issued for")
    oidc_tenant_claim: str = setting("tenant", Text(), "the OIDC token claim naming the caller's tenant")
    metrics_public: bool = setting(False, Boolean(), "serve /metrics without credentials")
    insecure_no_auth: bool = setting(
        False, Boolean(), "allow a non-loopback --host without any authentication"
    )
    max_subscriptions_per_tenant: int | None = setting(
        None, Integer(minimum=1), "subscriptions a tenant may hold; 429 above"
    )
    tenant_policies: Path | None = setting(
        None, FilePath(must_exist=True), "JSON file of per-tenant receive and publish CESQL policies"
    )
    allow_sink_networks: tuple[str, ...] = setting(
        (), Networks(), "networks sinks may reach although private, loopback or link-local"
    )
    webhook_secret_overlap: float = setting(
        86400.0, Duration(), "how long deliveries are also signed with a replaced webhook secret"
    )
    secrets_key: Path | None = setting(
        None,
        FilePath(must_exist=True),
        "file holding the key that encrypts stored secrets",
        flag="--secrets-key-file",
        default_text="<db>.key",
    )
    tls_cert: Path | None = setting(None, FilePath(must_exist=True), "certificate chain (PEM) to serve HTTPS")
    tls_key: Path | None = setting(None, FilePath(must_exist=True), "private key (PEM) of --tls-cert")
    # -- telemetry (docs/observability.md): unset, each falls back to its OTEL_* variable --------
    otel_exporter_otlp_endpoint: str | None = setting(
        None,
        HttpUrl(),
        "OTLP/HTTP collector base URL (default: OTEL_EXPORTER_OTLP_ENDPOINT); without one, no traces "
        "and no OTLP metrics",
    )
    otel_exporter_otlp_protocol: str | None = setting(
        None,
        Choice(OTLP_PROTOCOLS),
        "OTLP protocol (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)",
    )
    otel_exporter_otlp_headers: str | None = setting(
        None, SecretPairs(), "headers sent with every OTLP export (default: OTEL_EXPORTER_OTLP_HEADERS)"
    )
    otel_service_name: str | None = setting(
        None, Text(), "service.name of the exported telemetry (default: OTEL_SERVICE_NAME, else cebroker)"
    )
    otel_resource_attributes: str | None = setting(
        None, Text(), "key=value,... resource attributes (default: OTEL_RESOURCE_ATTRIBUTES)"
    )
    otel_traces_sampler: str | None = setting(
        None,
        Choice(SAMPLERS),
        "trace sampler (default: OTEL_TRACES_SAMPLER, else parentbased_always_on)",
    )
    otel_traces_sampler_arg: float | None = setting(
        None, Ratio(), "ratio of the traceidratio samplers (default: OTEL_TRACES_SAMPLER_ARG, else 1.0)"
    )

    def __post_init__(self) -> None:
        check_declared(self)

    @property
    def public_url(self) -> str:
        """The base URL clients use to reach this broker, without a trailing slash."""
        if self.base_url:
            return self.base_url.rstrip("/")
        scheme = "https" if self.tls_cert is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def authenticated(self) -> bool:
        """Whether calls need credentials (API keys or OIDC tokens are configured)."""
        return self.api_keys is not None or self.oidc_issuer is not None

    @property
    def loopback_only(self) -> bool:
        """Whether the API listens on a loopback address only."""
        return is_loopback_host(self.host)

    def serving_problems(self) -> list[str]:
        """Why ``cebroker serve`` must not start with these settings (empty when it may): settings
        that only work together, and a broker that anyone on the network could use."""
        problems: list[str] = []
        if (self.oidc_issuer is None) != (self.oidc_audience is None):
            problems.append("--oidc-issuer and --oidc-audience are given together (or neither)")
        if (self.tls_cert is None) != (self.tls_key is None):
            problems.append("--tls-cert and --tls-key are given together (or neither)")
        if not self.authenticated and not self.loopback_only and not self.insecure_no_auth:
            problems.append(
                f"--host {self.host} is not a loopback address and no authentication is configured"
                " (--api-keys or --oidc-issuer): anyone who can reach the port could manage"
                " subscriptions and make the broker connect anywhere; configure authentication, or"
                " give --insecure-no-auth to accept that"
            )
        return problems

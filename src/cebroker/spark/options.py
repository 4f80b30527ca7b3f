"""The ``cloudevents`` data source's options, parsed and checked once on the driver.

Spark hands options over as a case-insensitive string map; :meth:`SinkOptions.parse` turns it
into a frozen, typed object (pickled to the executors with the writer) and raises
:class:`SinkConfigError` naming the option for anything it cannot use, so a misconfigured query
fails when it starts, not in the middle of a micro-batch.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_BATCH_SIZE = 1000
MAX_BATCH_SIZE = 100_000


class SinkConfigError(ValueError):
    """An option of the ``cloudevents`` data source is missing or invalid."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        super().__init__(f"cloudevents option {option!r}: {message}")


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """How a refused or failed batch request is retried before the task gives up.

    Retries apply to 429, 502, 503, 504 and connection errors or timeouts. Delays grow
    exponentially from ``initial_backoff`` up to ``max_backoff`` (with jitter); a server's
    ``Retry-After`` replaces the computed delay. After ``max_time`` seconds the batch fails and
    the task raises, so Spark retries the micro-batch.
    """

    initial_backoff: float = 0.2
    max_backoff: float = 10.0
    max_time: float = 120.0


@dataclass(frozen=True, kw_only=True, slots=True)
class SinkOptions:
    """Everything the writer needs; see ``docs/spark.md`` for the option table."""

    url: str
    batch_size: int = DEFAULT_BATCH_SIZE
    #: Batches of one partition posted concurrently; 1 keeps the partition's order at the broker.
    in_flight: int = 2
    connect_timeout: float = 5.0
    request_timeout: float = 30.0
    default_source: str | None = None
    default_type: str | None = None
    authorization: str | None = None
    error_path: Path | None = None
    corrupt_record_column: str = "_corrupt_record"
    ignore_null_fields: bool = True
    retry: RetryPolicy = RetryPolicy()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Build the options from Spark's (case-insensitive) option map."""
        opts = {key.lower(): value for key, value in options.items()}
        url = opts.get("url")
        if not url:
            raise SinkConfigError(
                "url", "required: the broker's events endpoint, e.g. http://host:8080/events"
            )
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SinkConfigError("url", f"must be an http:// or https:// URL, got {url!r}")
        return cls(
            url=url,
            batch_size=_int(opts, "batchSize", DEFAULT_BATCH_SIZE, 1, MAX_BATCH_SIZE),
            in_flight=_int(opts, "maxInFlight", 2, 1, 16),
            connect_timeout=_seconds(opts, "connectTimeout", 5.0),
            request_timeout=_seconds(opts, "requestTimeout", 30.0),
            default_source=_non_empty(opts, "source"),
            default_type=_non_empty(opts, "type"),
            authorization=_authorization(opts),
            error_path=_error_path(opts),
            corrupt_record_column=opts.get("corruptrecordcolumn", "_corrupt_record"),
            ignore_null_fields=_bool(opts, "ignoreNullFields", True),
            retry=RetryPolicy(
                initial_backoff=_seconds(opts, "retryInitialBackoff", 0.2),
                max_backoff=_seconds(opts, "retryMaxBackoff", 10.0),
                max_time=_seconds(opts, "retryMaxTime", 120.0, allow_zero=True),
            ),
        )


def _int(opts: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SinkConfigError(name, f"not an integer: {raw!r}") from None
    if not low <= value <= high:
        raise SinkConfigError(name, f"must be between {low} and {high}, got {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise SinkConfigError(name, f"must be true or false, got {raw!r}")


def _seconds(opts: Mapping[str, str], name: str, default: float, *, allow_zero: bool = False) -> float:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SinkConfigError(name, f"not a number of seconds: {raw!r}") from None
    if value < 0 or (value == 0 and not allow_zero) or value != value:
        raise SinkConfigError(name, f"must be a positive number of seconds, got {raw!r}")
    return value


def _non_empty(opts: Mapping[str, str], name: str) -> str | None:
    raw = opts.get(name.lower())
    if raw is not None and not raw:
        raise SinkConfigError(name, "must not be empty when given")
    return raw


def _authorization(opts: Mapping[str, str]) -> str | None:
    token = opts.get("bearertoken")
    user = opts.get("username")
    password = opts.get("password")
    if token is not None and (user is not None or password is not None):
        raise SinkConfigError("bearerToken", "give either bearerToken or username/password, not both")
    if token is not None:
        if not token:
            raise SinkConfigError("bearerToken", "must not be empty")
        return f"Bearer {token}"
    if user is None and password is None:
        return None
    if not user or password is None:
        raise SinkConfigError("username", "basic authentication needs both username and password")
    pair = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {pair}"


def _error_path(opts: Mapping[str, str]) -> Path | None:
    raw = opts.get("errorpath")
    if raw is not None:
        if not raw:
            raise SinkConfigError("errorPath", "must not be empty when given")
        return _local_path("errorPath", raw)
    checkpoint = opts.get("checkpointlocation")
    if checkpoint and urlsplit(checkpoint).scheme in ("", "file"):
        # Streaming queries have a checkpoint; keeping rejected rows beside it is a safe default.
        return _local_path("checkpointLocation", checkpoint) / "errors"
    return None


def _local_path(option: str, raw: str) -> Path:
    parts = urlsplit(raw)
    if parts.scheme == "file":
        return Path(parts.path)
    if parts.scheme and len(parts.scheme) > 1:  # a one-letter scheme is a Windows drive
        raise SinkConfigError(option, f"must be a filesystem path the executors can write, got {raw!r}")
    return Path(raw)

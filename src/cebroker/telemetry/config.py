"""What telemetry the broker exports, from its settings and the standard ``OTEL_*`` variables.

Each value comes from the broker's own setting when it is given (``--otel-exporter-otlp-endpoint``
or ``CEBROKER_OTEL_EXPORTER_OTLP_ENDPOINT``, ...), else from the OpenTelemetry variable of the
same name (``OTEL_EXPORTER_OTLP_ENDPOINT``, ...), else the default. Telemetry is off unless an
OTLP endpoint is configured (for traces or for all signals); ``OTEL_SDK_DISABLED=true`` turns it
off whatever else is set. Values are checked here, once: a bad one stops ``serve`` with a line
naming the variable, never a silent default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from cebroker.errors import ConfigurationError
from cebroker.settings import OTLP_PROTOCOLS, SAMPLERS, Settings

#: The signal paths OTLP/HTTP appends to a base endpoint (the specification's defaults).
TRACES_PATH = "/v1/traces"
METRICS_PATH = "/v1/metrics"
DEFAULT_SERVICE_NAME = "cebroker"


class TelemetryConfigError(ConfigurationError):
    """A telemetry setting or ``OTEL_*`` variable that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetryConfig:
    """Resolved telemetry configuration (see the module docstring).

    Attributes:
        traces_endpoint: the full OTLP/HTTP URL spans are posted to; None: no traces.
        metrics_endpoint: the full OTLP/HTTP URL metrics are posted to; None: Prometheus only.
        headers: sent with every export (an API key, often): never logged or shown.
        service_name: the ``service.name`` resource attribute.
        resource_attributes: further resource attributes (``OTEL_RESOURCE_ATTRIBUTES``).
        sampler: one of :data:`cebroker.settings.SAMPLERS`.
        sampler_ratio: the ratio of the ``traceidratio`` samplers (0..1).
    """

    traces_endpoint: str | None = None
    metrics_endpoint: str | None = None
    headers: Mapping[str, str] | None = None
    service_name: str = DEFAULT_SERVICE_NAME
    resource_attributes: Mapping[str, str] | None = None
    sampler: str = "parentbased_always_on"
    sampler_ratio: float = 1.0

    def __repr__(self) -> str:  # the headers may hold credentials
        return (
            f"TelemetryConfig(traces_endpoint={self.traces_endpoint!r}, "
            f"metrics_endpoint={self.metrics_endpoint!r}, service_name={self.service_name!r}, "
            f"sampler={self.sampler!r}, sampler_ratio={self.sampler_ratio!r})"
        )

    @property
    def enabled(self) -> bool:
        """Whether anything is exported over OTLP."""
        return self.traces_endpoint is not None or self.metrics_endpoint is not None

    @classmethod
    def resolve(cls, settings: Settings, environ: Mapping[str, str]) -> TelemetryConfig:
        """The configuration ``settings`` and the ``OTEL_*`` variables of ``environ`` give.

        Raises:
            TelemetryConfigError: a value is unusable (the message names where it came from).
        """
        if _flag(environ, "OTEL_SDK_DISABLED"):
            return cls()

        def pick(value: str | None, variable: str) -> tuple[str | None, str]:
            if value is not None:
                return value, "--" + variable.lower().replace("_", "-")
            text = environ.get(variable, "").strip()
            return (text or None), variable

        protocol, where = pick(settings.otel_exporter_otlp_protocol, "OTEL_EXPORTER_OTLP_PROTOCOL")
        if protocol is not None and protocol not in OTLP_PROTOCOLS:
            raise TelemetryConfigError(
                f"{where}: protocol {protocol!r} is not supported; use {' or '.join(OTLP_PROTOCOLS)}"
            )
        base, base_where = pick(settings.otel_exporter_otlp_endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT")
        traces = _signal_endpoint(environ, "TRACES", base, base_where, TRACES_PATH)
        metrics = _signal_endpoint(environ, "METRICS", base, base_where, METRICS_PATH)
        if _choice(environ, "OTEL_TRACES_EXPORTER") == "none":
            traces = None
        if _choice(environ, "OTEL_METRICS_EXPORTER") == "none":
            metrics = None
        headers_text, headers_where = pick(settings.otel_exporter_otlp_headers, "OTEL_EXPORTER_OTLP_HEADERS")
        name, _ = pick(settings.otel_service_name, "OTEL_SERVICE_NAME")
        attributes_text, attributes_where = pick(
            settings.otel_resource_attributes, "OTEL_RESOURCE_ATTRIBUTES"
        )
        attributes = _pairs(attributes_text, attributes_where, secret=False)
        sampler, sampler_where = pick(settings.otel_traces_sampler, "OTEL_TRACES_SAMPLER")
        if sampler is not None and sampler not in SAMPLERS:
            raise TelemetryConfigError(f"{sampler_where}: unknown sampler {sampler!r}; use one of {SAMPLERS}")
        ratio: float | None = settings.otel_traces_sampler_arg
        if ratio is None and environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip():
            ratio = _ratio(environ["OTEL_TRACES_SAMPLER_ARG"])
        return cls(
            traces_endpoint=traces,
            metrics_endpoint=metrics,
            headers=_pairs(headers_text, headers_where, secret=True),
            service_name=name or (attributes or {}).get("service.name") or DEFAULT_SERVICE_NAME,
            resource_attributes=attributes,
            sampler=sampler or "parentbased_always_on",
            sampler_ratio=1.0 if ratio is None else ratio,
        )


def _flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() == "true"


def _choice(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name, "").strip().lower()


def _signal_endpoint(
    environ: Mapping[str, str], signal: str, base: str | None, base_where: str, path: str
) -> str | None:
    """The signal's own variable (used as is), else the base endpoint with the signal's path."""
    own = environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", "").strip()
    if own:
        _check_url(own, f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
        return own
    if base is None:
        return None
    _check_url(base, base_where)
    return base.rstrip("/") + path


def _check_url(url: str, where: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TelemetryConfigError(f"{where}: not an http:// or https:// URL")
    if parts.username or parts.password:
        raise TelemetryConfigError(
            f"{where}: credentials in the URL are not accepted; give them as OTLP headers"
        )


def _pairs(text: str | None, where: str, *, secret: bool) -> dict[str, str] | None:
    """``key=value,key=value`` (values percent-decoded), as the OTLP variables write them."""
    if text is None:
        return None
    pairs: dict[str, str] = {}
    for number, item in enumerate(text.split(","), start=1):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            shown = f"item {number}" if secret else repr(item.strip()[:100])
            raise TelemetryConfigError(f"{where}: {shown} is not key=value")
        pairs[unquote(key.strip())] = unquote(value.strip())
    return pairs


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TelemetryConfigError(f"OTEL_TRACES_SAMPLER_ARG: {text[:50]!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise TelemetryConfigError("OTEL_TRACES_SAMPLER_ARG: the ratio must be between 0 and 1")
    return value

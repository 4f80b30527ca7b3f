"""The broker's telemetry: OpenTelemetry traces, OTLP metrics, HTTP server metrics.

Off unless an OTLP endpoint is configured (:mod:`.config`). :func:`build_telemetry` makes one
:class:`Telemetry` per broker from the configuration: its ``tracing`` is handed to the parts that
trace (:mod:`.tracing`), its middleware measures every request (:mod:`.http`), and the
Prometheus registry is exported over OTLP when metrics are on (:mod:`.metrics`). Nothing here is
process-global: no global tracer or meter provider is set, so several brokers in one process
(the tests) each export their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)
from prometheus_client import CollectorRegistry
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from cebroker import __version__
from cebroker.telemetry.config import TelemetryConfig, TelemetryConfigError
from cebroker.telemetry.http import HttpMetrics, HttpTelemetry
from cebroker.telemetry.metrics import add_runtime_collectors, otlp_metrics
from cebroker.telemetry.tracing import NO_TRACING, Tracing

__all__ = ["NO_TRACING", "Telemetry", "TelemetryConfig", "TelemetryConfigError", "Tracing", "build_telemetry"]


def sampler_of(config: TelemetryConfig) -> Sampler:
    """The sampler ``config`` names (the standard ``OTEL_TRACES_SAMPLER`` values)."""
    root: Sampler
    name = config.sampler.removeprefix("parentbased_")
    if name == "always_off":
        root = ALWAYS_OFF
    elif name == "traceidratio":
        root = TraceIdRatioBased(config.sampler_ratio)
    else:
        root = ALWAYS_ON
    return ParentBased(root) if config.sampler.startswith("parentbased_") else root


def resource_of(config: TelemetryConfig) -> Resource:
    """``service.name``, ``service.version`` and the configured resource attributes."""
    attributes: dict[str, str] = {"service.version": __version__}
    attributes.update(config.resource_attributes or {})
    attributes["service.name"] = config.service_name
    return Resource.create(attributes)


class Telemetry:
    """One broker's telemetry (a component: no routes; flushes and stops with the broker)."""

    def __init__(self, tracing: Tracing, http: HttpMetrics, meters: MeterProvider | None = None) -> None:
        self.tracing = tracing
        self.http = http
        self._meters = meters

    def routes(self) -> Sequence[BaseRoute]:
        """No routes (the metrics are served by ``/metrics``)."""
        return ()

    def middleware(self) -> Middleware:
        """The HTTP server metrics and spans, in front of every route."""
        return Middleware(HttpTelemetry, metrics=self.http, tracing=self.tracing)

    async def start(self) -> None:
        """Nothing to start: the exporters run on their own threads."""

    async def stop(self) -> None:
        """Export what is buffered, then stop the exporters (on a thread: an export waits for
        the collector, up to the exporter's timeout, and must not hold the event loop)."""
        await asyncio.to_thread(self.tracing.shutdown)
        if self._meters is not None:
            await asyncio.to_thread(self._meters.shutdown)


def build_telemetry(config: TelemetryConfig, registry: CollectorRegistry) -> Telemetry:
    """The telemetry ``config`` asks for, measuring into (and exporting) ``registry``."""
    add_runtime_collectors(registry)
    http = HttpMetrics(registry)
    resource = resource_of(config)
    tracing = NO_TRACING
    if config.traces_endpoint is not None:
        # No exit hook (a process-wide registration): the broker flushes at its own stop.
        provider = TracerProvider(resource=resource, sampler=sampler_of(config), shutdown_on_exit=False)
        exporter = OTLPSpanExporter(endpoint=config.traces_endpoint, headers=dict(config.headers or {}))
        provider.add_span_processor(BatchSpanProcessor(exporter))
        tracing = Tracing(provider)
    meters = None
    if config.metrics_endpoint is not None:
        meters = otlp_metrics(
            registry, endpoint=config.metrics_endpoint, headers=config.headers, resource=resource
        )
    return Telemetry(tracing, http, meters)

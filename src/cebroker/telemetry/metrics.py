"""Metrics: the Prometheus registry stays the one place metrics are recorded; with OTLP metrics
configured, the same families are exported over OTLP as well.

Why a bridge rather than recording through the OpenTelemetry metrics API: every metric of the
broker (and of its sources) is a ``prometheus_client`` instrument updated on the hot path, and
``/metrics`` must keep its names and labels. Recording each one twice would double the hot
path's cost and the code; reading the registry when the OTLP reader collects (every
``OTEL_METRIC_EXPORT_INTERVAL``, 60 s by default) costs nothing between exports. Each family
becomes an observable instrument of the same name: counters a cumulative counter (without the
``_total`` suffix), gauges a gauge, histograms their ``_bucket`` (attribute ``le``), ``_count``
and ``_sum`` series as counters, as Prometheus shows them. Labels become attributes.

:func:`add_runtime_collectors` adds what operators expect of a process: CPU seconds, resident
memory, open file descriptors (``process_*``), garbage collections (``python_gc_*``) and the
interpreter (``python_info``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

INSTRUMENTATION = "cebroker"


def add_runtime_collectors(registry: CollectorRegistry) -> None:
    """Register the process, garbage collector and platform collectors in ``registry``."""
    ProcessCollector(registry=registry)
    GCCollector(registry=registry)
    PlatformCollector(registry=registry)


def _samples(registry: CollectorRegistry, family: str, suffixes: tuple[str, ...]) -> Iterable[Observation]:
    for metric in registry.collect():
        if metric.name != family:
            continue
        for sample in metric.samples:
            if sample.name in suffixes:
                yield Observation(sample.value, dict(sample.labels))


def _callback(
    registry: CollectorRegistry, family: str, suffixes: tuple[str, ...]
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        return list(_samples(registry, family, suffixes))

    return observe


def otlp_metrics(
    registry: CollectorRegistry, *, endpoint: str, headers: Mapping[str, str] | None, resource: Resource
) -> MeterProvider:
    """A meter provider that exports every family of ``registry`` to ``endpoint`` (see the
    module docstring); shut it down at the broker's stop."""
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint, headers=dict(headers or {})))
    # No exit hook (a process-wide registration): the broker stops it with itself.
    provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
    meter = provider.get_meter(INSTRUMENTATION)
    for metric in registry.collect():
        name, doc = metric.name, metric.documentation
        if metric.type == "counter":
            meter.create_observable_counter(
                name, [_callback(registry, name, (name + "_total",))], description=doc
            )
        elif metric.type == "gauge":
            meter.create_observable_gauge(name, [_callback(registry, name, (name,))], description=doc)
        elif metric.type == "histogram":
            for suffix in ("_bucket", "_count", "_sum"):
                meter.create_observable_counter(
                    name + suffix, [_callback(registry, name, (name + suffix,))], description=doc
                )
        elif metric.type in ("info", "unknown"):
            meter.create_observable_gauge(
                name, [_callback(registry, name, (name, name + "_info"))], description=doc
            )
    return provider

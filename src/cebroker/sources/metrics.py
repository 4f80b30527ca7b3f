"""Prometheus view of the ingress sources, read when ``/metrics`` is scraped. Per source (label
``source``: its name): messages received, events accepted, invalid messages refused, transient
ingest failures retried, reconnects, restarts after an unexpected stop, refused messages
dropped from the quarantine, and the gauge ``cebroker_source_subscribed``: 1 only while the
source is consuming (subscribed and polling; 0 while it reconnects, restarts or is stalled)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from cebroker.sources.component import Source

_COUNTERS = {
    "received": "Messages received from the source",
    "accepted": "Events from the source committed to the durable log",
    "invalid": "Messages from the source refused as not valid (kept in its quarantine)",
    "retries": "Hand-overs to the ingest path retried after a transient failure",
    "reconnects": "Reconnects to the source's server",
}


class SourcesCollector(Collector):
    """Collects the counters of whatever sources ``health()`` returns at scrape time."""

    def __init__(self, health: Callable[[], Sequence[tuple[Source, bool]]]) -> None:
        self._health = health

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        sources = self._health()
        for name, help_text in _COUNTERS.items():
            family = CounterMetricFamily(f"cebroker_source_{name}", help_text, labels=["source"])
            for source, _up in sources:
                family.add_metric([source.name], float(getattr(source.receiver.stats, name)))
            yield family
        restarts = CounterMetricFamily(
            "cebroker_source_restarts",
            "Restarts of the source after it stopped unexpectedly",
            labels=["source"],
        )
        dropped = CounterMetricFamily(
            "cebroker_source_rejects_dropped",
            "Refused messages dropped from the quarantine to keep it within its bounds",
            labels=["source"],
        )
        subscribed = GaugeMetricFamily(
            "cebroker_source_subscribed", "1 while the source is consuming", labels=["source"]
        )
        for source, up in sources:
            restarts.add_metric([source.name], float(source.restarts))
            dropped.add_metric([source.name], float(source.rejects.dropped))
            subscribed.add_metric([source.name], 1.0 if up else 0.0)
        yield restarts
        yield dropped
        yield subscribed

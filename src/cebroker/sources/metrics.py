"""Prometheus view of the ingress sources: per source, messages received, events accepted,
invalid messages dropped, transient ingest failures retried and reconnects, read from the
receivers' counters when ``/metrics`` is scraped."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from ceprotocols.receiver import Receiver
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

_COUNTERS = {
    "received": "Messages received from the source",
    "accepted": "Events from the source committed to the durable log",
    "invalid": "Messages from the source dropped as not valid CloudEvents",
    "retries": "Hand-overs to the ingest path retried after a transient failure",
    "reconnects": "Reconnects to the source's server",
}


class SourcesCollector(Collector):
    """Collects the counters of whatever receivers ``receivers()`` returns at scrape time."""

    def __init__(self, receivers: Callable[[], Sequence[Receiver]]) -> None:
        self._receivers = receivers

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        receivers = self._receivers()
        for name, help_text in _COUNTERS.items():
            family = CounterMetricFamily(f"cebroker_source_{name}", help_text, labels=["source"])
            for receiver in receivers:
                family.add_metric([receiver.source], float(getattr(receiver.stats, name)))
            yield family
        subscribed = GaugeMetricFamily(
            "cebroker_source_subscribed", "1 while the source is consuming", labels=["source"]
        )
        for receiver in receivers:
            subscribed.add_metric([receiver.source], 1.0 if receiver.stats.subscribed else 0.0)
        yield subscribed

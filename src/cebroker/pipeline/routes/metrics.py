"""``GET /metrics``: the pipeline's Prometheus metrics (text exposition format).

The text grows with the number of subscriptions (several series each), so it is written on a
worker thread (``prometheus_client`` collects under its own locks), not on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cebroker.pipeline.metrics import PipelineMetrics


class MetricsApi:
    """Serves one broker instance's metrics registry."""

    def __init__(self, metrics: PipelineMetrics) -> None:
        self._metrics = metrics

    def routes(self) -> Sequence[BaseRoute]:
        """``GET /metrics``."""
        return [Route("/metrics", self.get, methods=["GET"])]

    async def get(self, request: Request) -> Response:
        """The current values of every metric."""
        text = await asyncio.to_thread(generate_latest, self._metrics.registry)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

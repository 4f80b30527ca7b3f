"""``GET /metrics``: the pipeline's Prometheus metrics (text exposition format)."""

from __future__ import annotations

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
        return Response(generate_latest(self._metrics.registry), media_type=CONTENT_TYPE_LATEST)

"""The pipeline's HTTP routes: ``POST /events`` (``events``), ``GET /metrics`` (``metrics``) and
the per-subscription status and dead-letter routes (``deliveries``)."""

"""The pipeline's HTTP routes: ``POST /events`` (``events``), ``GET /metrics`` (``metrics``), the
per-subscription status and dead-letter routes (``deliveries``), the live tail of a subscription's
matched events (``tail``), explaining a match (``explain``) and the broker-wide delivery overview
(``overview``)."""

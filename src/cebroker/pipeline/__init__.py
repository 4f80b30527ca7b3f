"""The event pipeline: ingress to durable log to per-subscription delivery.

Modules, in the order an event meets them: ``routes`` (``POST /events`` and the status,
dead-letter and metrics routes), ``wellformed`` (the CloudEvents checks at the edge),
``ingest`` (the :class:`~cebroker.contracts.Ingestor`), ``matcher`` (the live subscription index), then the
durable log (the :class:`~cebroker.storage.DeliveryLog` contract of the storage layer),
``dispatch`` (the dispatcher and its parts: lanes, attempts, retry decisions, dead letters,
completions, the loader, the backlog count) with ``policy`` and ``senders``, ``metrics``,
``delivery_rules`` (what the pipeline declares for subscription validation) and ``component``
(creation, wiring and lifecycle).
"""

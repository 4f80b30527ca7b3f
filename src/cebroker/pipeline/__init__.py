"""The event pipeline: ingress to durable log to per-subscription delivery.

Modules, in the order an event meets them: ``validation`` (checks at the edge), ``ingest``
(the :class:`~cebroker.contracts.Ingestor`), ``matcher`` (the live subscription
index), ``log`` with ``writer``, ``schema``, ``records`` and ``checkpoint`` (the durable log on
SQLite), ``dispatcher`` with ``lane``, ``policy`` and ``senders`` (delivery, retries, dead
letters), ``metrics``, ``rules`` (settings taught to the Subscriptions API) and ``component``
(creation, wiring and lifecycle). ``contracts`` holds what other parts code against.
"""

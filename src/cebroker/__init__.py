"""cebroker: a CloudEvents subscription-manager broker.

The service composes three parts: the Subscriptions API and its store (``cebroker.api``,
``cebroker.store``), the event pipeline (``cebroker.pipeline``) that matches events with
``cefilters`` and delivers them with ``ceprotocols``, and the xRegistry (``cebroker.registry``).
"""

__version__ = "0.1.0"

"""cebroker: a CloudEvents subscription-manager broker.

The service composes three parts: the Subscriptions API (``cebroker.api``), the event pipeline
(``cebroker.pipeline``) that matches events with ``cefilters`` and delivers them with
``ceprotocols``, and the xRegistry (``cebroker.registry``), over one storage layer
(``cebroker.storage``) that keeps everything they need behind three contracts.
"""

__version__ = "0.1.0"

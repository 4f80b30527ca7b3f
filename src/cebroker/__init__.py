"""cebroker: a CloudEvents subscription-manager broker.

The service composes three parts: the Subscriptions API (``cebroker.api``), the event pipeline
(``cebroker.pipeline``) that matches events with ``cefilters`` and delivers them with
``ceprotocols``, and the xRegistry (``cebroker.registry``), over one storage layer
(``cebroker.storage``) that keeps everything they need behind three contracts.
"""

from importlib.metadata import version as _version

#: The installed distribution's version (its one source is the repository's VERSION file).
__version__ = _version("cebroker")

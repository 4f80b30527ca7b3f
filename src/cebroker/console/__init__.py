"""The web console at ``/console``: pages over the broker's own HTTP API, served by the broker.

The pages are plain ES modules and one stylesheet shipped in this package (``static/``): no
build step, no framework, nothing fetched from elsewhere. Everything they show comes from the
public API (``/status``, ``/subscriptions``, ``/explain``, the registry, ...), with the same
bearer token a script would send.
"""

from cebroker.console.routes import ConsoleComponent

__all__ = ["ConsoleComponent"]

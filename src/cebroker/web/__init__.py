"""HTTP helpers shared by every part that serves routes: problem+json answers (``problem``),
JSON request bodies with media type and size checks (``body``), ``If-Match`` (``conditional``)
and an endpoint that routes by method and owns 405 and ``Allow`` (``methods``).

This package sits below the Subscriptions API, the pipeline and the registry and imports none
of them, so each can serve HTTP without depending on another.
"""

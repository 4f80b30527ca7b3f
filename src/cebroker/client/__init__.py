"""The management commands of ``cebroker``: a client of a running broker's HTTP API.

``cebroker subscriptions list|get|create|delete``, ``cebroker events send``, ``cebroker
deadletters list|redrive``, ``cebroker explain`` and ``cebroker tail``. Every command takes
``--url`` (``CEBROKER_URL``) and ``--token`` (``CEBROKER_TOKEN``, sent as ``Authorization:
Bearer``), prints tables for people or, with ``--json``, JSON for scripts, and exits non-zero on
any error with the broker's problem details spelled out.
"""

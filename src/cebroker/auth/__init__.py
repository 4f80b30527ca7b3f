"""Who may call the broker: API keys and OIDC tokens become principals, a table of rules says
which scope each route needs, and management writes are written to the audit log.

* :mod:`.keys`: the API keys file (SHA-256 hashes), re-read on change or ``SIGHUP``;
* :mod:`.oidc`: RS256/ES256 bearer tokens of one issuer (PyJWT), keys from its JWKS;
* :mod:`.authenticator`: the ``Authorization`` header to a principal;
* :mod:`.scopes`: the scope of every route;
* :mod:`.middleware`: the ASGI middleware that applies them;
* :mod:`.audit`: one structured line per management write;
* :mod:`.component`: built from the settings, started and stopped with the broker.
"""

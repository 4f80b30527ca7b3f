"""confluent-kafka configuration shared by the producer and the consumer: bootstrap servers,
TLS and SASL (PLAIN, or OAUTHBEARER with a given access token)."""

from __future__ import annotations

import logging
from typing import Any

from ceprotocols.credentials import AccessToken, Credential, Plain
from ceprotocols.endpoint import Endpoint

#: librdkafka's own log lines (connection refused while a broker is down...) go to this logger
#: instead of stderr.
log = logging.getLogger("ceprotocols.kafka.client")


def client_config(endpoint: Endpoint, credential: Credential | None) -> dict[str, Any]:
    """librdkafka settings for reaching ``endpoint`` with ``credential``."""
    config: dict[str, Any] = {
        "bootstrap.servers": ",".join(f"{host}:{port}" for host, port in endpoint.hosts),
        "logger": log,
    }
    tls = endpoint.tls
    if credential is None:
        config["security.protocol"] = "ssl" if tls else "plaintext"
        return config
    config["security.protocol"] = "sasl_ssl" if tls else "sasl_plaintext"
    if isinstance(credential, Plain):
        config.update({"sasl.mechanisms": "PLAIN", "sasl.username": credential.identifier})
        config["sasl.password"] = credential.secret
    elif isinstance(credential, AccessToken):
        expires = credential.expires.timestamp() if credential.expires else 2**31 - 1
        token = credential.token
        config["sasl.mechanisms"] = "OAUTHBEARER"
        config["oauth_cb"] = lambda _config: (token, expires)
    return config

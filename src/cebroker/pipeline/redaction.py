"""Keeping credentials out of what the broker records about a failed delivery.

Error messages of protocol clients may quote the URL they failed on, user information
included (``amqp://user:password@host``, or a token as the user name). Such text is stored (a
retry's last error, a dead letter's reason, the status route) and logged, so the user
information of every URL in it is replaced before it is kept. The API refuses sink URLs with a
password; this covers the messages of clients, a token given as the user name, and subscriptions
stored before that rule.
"""

from __future__ import annotations

from ceprotocols.endpoint import redact_text


def redact_userinfo(text: str) -> str:
    """``text`` with the user information of every ``scheme://userinfo@`` replaced by ``***``."""
    return redact_text(text)

"""Keeping passwords out of what the broker records about a failed delivery.

Error messages of protocol clients may quote the URL they failed on, user information
included (``amqp://user:password@host``). Such text is stored (a retry's last error, a dead
letter's reason, the status route) and logged, so the password of every URL in it is replaced
before it is kept. The API refuses sink URLs with a password; this covers the messages of
clients and subscriptions stored before that rule.
"""

from __future__ import annotations

import re

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/@:]*):[^\s/@]*@")


def redact_userinfo(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` replaced by ``***``."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)

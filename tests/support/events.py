"""Sample CloudEvents for the tests that send events to a broker."""

from __future__ import annotations

from typing import Any


def event(n: int = 1, **extra: Any) -> dict[str, Any]:
    """A valid structured event: id ``e-<n>``, JSON data ``{"n": n}``; ``extra`` adds or
    replaces attributes."""
    return {
        "specversion": "1.0",
        "id": f"e-{n}",
        "source": "/tests",
        "type": "com.example.test",
        "datacontenttype": "application/json",
        "data": {"n": n},
        **extra,
    }

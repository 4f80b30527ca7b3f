"""Durations and byte sizes as people write them: ``10s``, ``24h``, ``1h30m``, ``64KiB``, ``1MB``.

A plain number keeps its old meaning (seconds, bytes), so ``--dedup-window 600`` and
``--dedup-window 10m`` are the same setting.

Durations: one or more ``<number><unit>`` parts, units ``ms``, ``s``, ``m``, ``h``, ``d``
(``1h30m`` is 5400 seconds). Sizes: a number with an optional unit, decimal ``B``, ``kB``, ``MB``,
``GB``, ``TB`` (powers of 1000) or binary ``KiB``, ``MiB``, ``GiB``, ``TiB`` (powers of 1024).
Units are case-insensitive. There are no signs, exponents, ``nan`` or ``inf``: a setting never
becomes negative or infinite by accident. A single-letter size unit (``k``, ``M``) is refused
rather than guessed, since it could mean 1000 or 1024.
"""

from __future__ import annotations

import re
from decimal import Decimal

DURATION_UNITS: dict[str, Decimal] = {
    "ms": Decimal("0.001"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
    "d": Decimal(86400),
}
SIZE_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
#: How sizes are written back (help texts, documentation): the largest exact binary unit.
_SIZE_SPELLING = (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))

_NUMBER = r"\d+(?:\.\d+)?"
_PLAIN = re.compile(_NUMBER)
# "ms" before "m", so that "500ms" is not read as 500 minutes and a stray "s".
_DURATION_PART = re.compile(rf"({_NUMBER})(ms|s|m|h|d)")
_DURATION = re.compile(rf"(?:{_NUMBER}(?:ms|s|m|h|d))+")
_SIZE = re.compile(rf"({_NUMBER}) ?([a-z]*)")

DURATION_HELP = "seconds, or with units: 500ms, 10s, 5m, 24h, 7d, 1h30m"
SIZE_HELP = "bytes, or with a unit: kB, MB, GB, TB (1000s) or KiB, MiB, GiB, TiB (1024s)"


def parse_duration(text: str) -> float:
    """Seconds in ``text`` (``"600"``, ``"10m"``, ``"1h30m"``, ``"0.5s"``).

    Raises:
        ValueError: ``text`` is not a duration; the message says what is accepted.
    """
    spelled = text.strip().lower()
    if _PLAIN.fullmatch(spelled):
        return float(Decimal(spelled))
    if not _DURATION.fullmatch(spelled):
        raise ValueError(f"not a duration ({DURATION_HELP})")
    total = sum(
        (Decimal(number) * DURATION_UNITS[unit] for number, unit in _DURATION_PART.findall(spelled)),
        Decimal(0),
    )
    return float(total)


def format_duration(seconds: float) -> str:
    """``seconds`` in the largest unit that writes it exactly (600 -> ``10m``, 0.25 -> ``250ms``)."""
    exact = Decimal(str(seconds))
    for unit in ("d", "h", "m", "s", "ms"):
        count = exact / DURATION_UNITS[unit]
        if count == count.to_integral_value() and count != 0:
            return f"{int(count)}{unit}"
    return f"{seconds:g}s"


def parse_size(text: str) -> int:
    """Bytes in ``text`` (``"65536"``, ``"64KiB"``, ``"1.5MB"``); the result must be whole bytes.

    Raises:
        ValueError: ``text`` is not a size, or names a fraction of a byte.
    """
    match = _SIZE.fullmatch(text.strip().lower())
    if match is None or match.group(2) not in ("", *SIZE_UNITS):
        raise ValueError(f"not a size ({SIZE_HELP})")
    number, unit = match.groups()
    size = Decimal(number) * SIZE_UNITS[unit or "b"]
    if size != size.to_integral_value():
        raise ValueError("not a whole number of bytes")
    return int(size)


def format_size(size: int) -> str:
    """``size`` in the largest binary unit that writes it exactly (65536 -> ``64KiB``), else bytes."""
    for unit, factor in _SIZE_SPELLING:
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)

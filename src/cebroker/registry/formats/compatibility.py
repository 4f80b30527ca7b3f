"""Compatibility policies: which earlier versions a new one is compared with, and in which
direction.

* ``backward``: the new version reads data written with the previous one (the new schema is
  the reader); ``forward``: the previous version reads data written with the new one;
  ``full``: both. The ``_transitive`` forms compare with every earlier version instead of the
  previous one only. ``none`` compares nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cebroker.registry.formats import SchemaFormat

POLICIES = (
    "none",
    "backward",
    "backward_transitive",
    "forward",
    "forward_transitive",
    "full",
    "full_transitive",
)


@dataclass(frozen=True, slots=True)
class Violation:
    """One breaking change between the new version and an earlier one: the earlier version's
    id, the pointers in the earlier and the new document, the direction that breaks
    (``backward``: the new version cannot read the earlier one's data; ``forward``: the
    reverse) and why."""

    earlier: str
    old_pointer: str
    new_pointer: str
    direction: str
    reason: str


def violations(
    fmt: SchemaFormat, version: str, policy: str, new: bytes, earlier: Sequence[tuple[str, bytes]]
) -> list[Violation]:
    """Every breaking change of ``new`` under ``policy`` against ``earlier`` ((version id,
    document) pairs, oldest first)."""
    if policy == "none" or not earlier:
        return []
    targets = earlier if policy.endswith("_transitive") else earlier[-1:]
    kind = policy.removesuffix("_transitive")
    out: list[Violation] = []
    for vid, old in targets:
        if kind in ("backward", "full"):
            for b in fmt.breaks(new, old, version):
                out.append(Violation(vid, b.writer, b.reader, "backward", b.reason))
        if kind in ("forward", "full"):
            for b in fmt.breaks(old, new, version):
                out.append(Violation(vid, b.reader, b.writer, "forward", b.reason))
    return out

"""Checks of schema versions before a write commits: the document is valid in its format, and
it keeps the compatibility policy of its schema (or its group).

Each checked version gets the model's server-computed attributes ``formatvalidated`` (with
``formatvalidatedreason`` when false) and ``compatibilityvalidated`` (with
``compatibilityvalidatedreason`` when false): a document in a format the registry does not know,
or kept elsewhere (``schemaurl``), is stored unchecked and says so there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cebroker.errors import FieldProblem
from cebroker.registry.errors import XRegistryError
from cebroker.registry.formats import parse_format
from cebroker.registry.formats.catalog import WITH_RULES, Formats
from cebroker.registry.formats.compatibility import POLICIES, violations
from cebroker.registry.formats.proto_schema import CompileError
from cebroker.registry.model import SCHEMAS
from cebroker.registry.versions import VALIDATION_ATTRS
from cebroker.storage.registry import RegistryRows, Row


@dataclass(frozen=True, slots=True)
class CompatibilityProblem(FieldProblem):
    """A breaking change: ``pointer`` in the new document, ``old_pointer`` in the earlier
    version ``earlier``, and the ``direction`` that breaks."""

    old_pointer: str = ""
    earlier: str = ""
    direction: str = ""

    def to_json(self) -> dict[str, str]:
        """The ``errors`` entry: both pointers, the earlier version and the direction."""
        return {
            "pointer": self.pointer,
            "oldpointer": self.old_pointer,
            "version": self.earlier,
            "direction": self.direction,
            "detail": self.message,
        }


def policy_problem(attrs: dict[str, Any], pointer: str) -> FieldProblem | None:
    """A problem when ``attrs`` holds a ``compatibility`` that is not a known policy."""
    value = attrs.get("compatibility")
    if value is None or value in POLICIES:
        return None
    return FieldProblem(f"{pointer}/compatibility", f"must be one of {', '.join(POLICIES)}")


class SchemaChecks:
    """Runs the checks of the module docstring for one registry (its formats and caches)."""

    def __init__(self, formats: Formats | None = None) -> None:
        self.formats = formats or Formats()

    def check(
        self, rows: RegistryRows, version: Row, res: Row, group: Row
    ) -> tuple[list[FieldProblem], list[CompatibilityProblem]]:
        """The format problems and the breaking changes of ``version`` (a schema version written
        in this request); records the outcome in its attributes."""
        attrs = version.attrs
        for computed in VALIDATION_ATTRS:
            attrs.pop(computed, None)
        where = f"{version.xid}/{SCHEMAS.singular}"
        name = parse_format(attrs.get("format") or group.attrs.get("format"))
        policy = res.attrs.get("compatibility") or group.attrs.get("compatibility") or "none"
        if name is None:
            reason = "no format given" if not attrs.get("format") else "a format this registry does not know"
            self._unchecked(version, f"{reason}: stored unchecked", policy)
            rows.put(version)
            return [], []
        if version.doc is None:
            self._unchecked(version, "the document is not stored in this registry", policy)
            rows.put(version)
            return [], []
        fmt = self.formats.get(name.family)
        found = fmt.problems(version.doc, name.version)
        if found:
            return [FieldProblem(where + p.pointer, p.reason) for p in found], []
        attrs["formatvalidated"] = True
        if policy == "none" or policy not in POLICIES:
            rows.put(version)
            return [], []
        if name.family not in WITH_RULES:
            attrs["compatibilityvalidated"] = False
            attrs["compatibilityvalidatedreason"] = f"no compatibility rules for {name.family}"
            rows.put(version)
            return [], []
        earlier: list[tuple[str, bytes]] = []
        for other in rows.children(res.xid, "versions"):
            if other.xid == version.xid:
                break
            if other.doc is not None and not fmt.problems(other.doc, name.version):
                earlier.append((other.eid, other.doc))
        try:
            broken = violations(fmt, name.version, policy, version.doc, earlier)
        except CompileError as exc:  # an earlier version no longer compiles (it was checked when stored)
            broken = []
            attrs["compatibilityvalidatedreason"] = f"an earlier version does not compile: {exc}"
        out = [
            CompatibilityProblem(
                where + v.new_pointer,
                f"{v.direction} ({policy}) against version {v.earlier}: {v.reason}",
                old_pointer=f"{res.xid}/versions/{v.earlier}/{SCHEMAS.singular}{v.old_pointer}",
                earlier=v.earlier,
                direction=v.direction,
            )
            for v in broken
        ]
        attrs["compatibilityvalidated"] = "compatibilityvalidatedreason" not in attrs
        rows.put(version)
        return [], out

    def check_written(self, rows: RegistryRows, written: Iterable[str]) -> None:
        """Every schema version written in this request (``written``: version xids): valid in
        its format (else ``format_violation``), then within its compatibility policy (else
        ``compatibility_violation``, 409: the Schema Registry API's conflict)."""
        invalid: list[FieldProblem] = []
        breaking: list[CompatibilityProblem] = []
        formats: set[str] = set()
        policies: set[str] = set()
        subjects: list[str] = []  # the versions refused, in order
        for xid in sorted(written):
            version = rows.get(xid)
            res = rows.get(version.parent) if version is not None else None
            group = rows.get(res.parent) if res is not None else None
            if version is None or res is None or group is None or res.coll != SCHEMAS.plural:
                continue
            bad, broken = self.check(rows, version, res, group)
            if bad or broken:
                subjects.append(version.xid)
            if bad:
                formats.add(str(version.attrs.get("format") or group.attrs.get("format")))
            if broken:
                policies.add(str(res.attrs.get("compatibility") or group.attrs.get("compatibility")))
            invalid += bad
            breaking += broken
        if invalid:
            raise XRegistryError(
                "format_violation",
                subjects[0],
                detail="; ".join(f"{p.pointer}: {p.message}" for p in invalid),
                problems=invalid,
                format=", ".join(sorted(formats)),
            )
        if breaking:
            raise XRegistryError(
                "compatibility_violation",
                subjects[0],
                detail="; ".join(f"{p.pointer}: {p.message}" for p in breaking),
                problems=breaking,
                compatibility=", ".join(sorted(policies)),
            )

    @staticmethod
    def _unchecked(version: Row, reason: str, policy: str) -> None:
        version.attrs["formatvalidated"] = False
        version.attrs["formatvalidatedreason"] = reason
        if policy != "none":
            version.attrs["compatibilityvalidated"] = False
            version.attrs["compatibilityvalidatedreason"] = reason

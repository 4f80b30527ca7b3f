"""The registry store contract: synchronous row access inside one transaction.

The registry's core (``cebroker.registry``) is synchronous code over a small row API. A backend
runs a whole read or write of it in one transaction on a thread of its own: the async
:class:`RegistryStore` takes a function, calls it with a row-access object
(:class:`RegistryReader` for reads, :class:`RegistryRows` for writes) and returns what it
returned. A read sees one consistent snapshot; a write is committed, durably, when the call
returns, and a function that raises leaves nothing written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

Kind = Literal["registry", "group", "resource", "version"]


@dataclass(slots=True)
class Row:
    """One stored entity (the registry root, a group, a resource or a version), keyed by xid.

    ``coll`` is the collection it sits in within ``parent``. A resource row holds the
    resource-level (``meta``) attributes; a version row holds the version's attributes and, for
    document resources, the document bytes. ``seq`` orders rows by creation (0 until stored).
    """

    xid: str
    parent: str
    coll: str
    kind: Kind
    eid: str
    attrs: dict[str, Any] = field(default_factory=dict)
    doc: bytes | None = None
    seq: int = 0


class EntityClash(ValueError):
    """``put`` of a row whose id equals, ignoring case, another's in the same collection."""

    def __init__(self, xid: str) -> None:
        self.xid = xid
        super().__init__(f"{xid}: another entity of the collection has this id (ids ignore case)")


@runtime_checkable
class RegistryReader(Protocol):
    """Row reads inside one transaction (a consistent snapshot)."""

    def get(self, xid: str) -> Row | None:
        """The entity with exactly this xid."""
        ...

    def sibling(self, parent: str, coll: str, eid: str) -> Row | None:
        """The entity in ``parent``'s collection whose id equals ``eid`` ignoring case."""
        ...

    def children(self, parent: str, coll: str) -> list[Row]:
        """The entities of one collection, oldest first."""
        ...

    def count(self, parent: str, coll: str) -> int:
        """How many entities a collection holds."""
        ...

    def subtree(self, xid: str) -> list[Row]:
        """The entity and everything below it (``/`` is everything), oldest first."""
        ...

    def rows_of_kind(self, kind: Kind, coll: str | None = None) -> list[Row]:
        """Every entity of a kind (optionally of one collection), oldest first."""
        ...


@runtime_checkable
class RegistryRows(RegistryReader, Protocol):
    """Row reads and writes inside one write transaction."""

    def put(self, row: Row) -> Row:
        """Insert or replace ``row`` (by xid); a new row gets the next sequence number.

        Raises:
            EntityClash: another row of the collection has the same id ignoring case.
        """
        ...

    def delete_subtree(self, xid: str) -> int:
        """Delete the entity and everything below it; returns how many rows went."""
        ...


@runtime_checkable
class RegistryStore(Protocol):
    """Durable storage of the registry's entities; the storage bundle opens and closes it.

    ``fn`` runs on the backend's thread, so it must not touch the event loop. Errors: whatever
    ``fn`` raises propagates unchanged (and a write then stores nothing); a backend failure is
    :class:`cebroker.storage.errors.StorageUnavailable`.
    """

    async def read(self, fn: Callable[[RegistryReader], T]) -> T:
        """Run ``fn`` over one consistent snapshot of the rows."""
        ...

    async def write(self, fn: Callable[[RegistryRows], T]) -> T:
        """Run ``fn`` in one transaction, committed durably before this returns."""
        ...

    def watch(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` (on the event loop, without arguments) after a write that another
        broker instance committed on a shared store, so that what this instance derives from
        the rows can be rebuilt; returns a function that stops it. A store only this process
        writes never calls it."""
        ...

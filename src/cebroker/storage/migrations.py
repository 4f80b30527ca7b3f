"""Versioned schemas kept as SQL files, and the one runner that applies them on every backend.

Each backend ships its schema as package data: ``<backend package>/sql/<component>/NNNN_name.sql``
for the components ``storage``, ``subscriptions``, ``deliveries`` and ``registry``. The file
numbered ``n`` is step ``n``; version ``n`` of a component is its schema after step ``n``, recorded
in the ``schema_versions`` table. A new step is a new file; an earlier file is never edited.

:func:`migrate` is the same for every backend: each step runs in a transaction of its own,
under the backend's migration lock where it has one (PostgreSQL's advisory lock; a SQLite file
is held by one process already), that reads the recorded versions again, refuses a database
written by a newer release (a version newer than the code's, or a component the code does not
know) before anything changes, applies the step's whole script and records the new version.
Instances starting together on a fresh database each find, under the lock, what is left to do.
A backend gives the runner a :class:`SchemaTarget`: its transaction with the lock, its version
table, and how it runs a whole script (PostgreSQL sends the file as one statement string;
SQLite runs it statement by statement as SQLite's own tokenizer delimits them).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from importlib import resources
from typing import Protocol

from cebroker.storage.errors import SchemaTooNew

#: The components whose schemas are versioned, in the order their steps are applied.
COMPONENTS = ("storage", "subscriptions", "deliveries", "registry")


@dataclass(frozen=True)
class Step:
    """One migration step: a component's script that takes it to ``version``."""

    component: str
    version: int
    #: The file the step was read from (``0002_tenant.sql``).
    name: str
    #: The file's bytes: the whole script.
    script: bytes

    @property
    def text(self) -> str:
        """The script as text."""
        return self.script.decode("utf-8")


#: component -> its steps, oldest first (``steps[n - 1].version == n``).
Steps = Mapping[str, tuple[Step, ...]]


def load_steps(package: str) -> dict[str, tuple[Step, ...]]:
    """The steps a backend ships in ``<package>/sql/<component>/``, numbered from 1 without gaps.

    Raises:
        ValueError: a file is misnamed or out of sequence (a packaging mistake).
    """
    root = resources.files(package).joinpath("sql")
    steps: dict[str, tuple[Step, ...]] = {}
    for component in COMPONENTS:
        folder = root.joinpath(component)
        files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
        found: list[Step] = []
        for number, file in enumerate(files, start=1):
            prefix = file.name.split("_", 1)[0]
            if not prefix.isdigit() or int(prefix) != number:
                raise ValueError(
                    f"{package}: migration {component}/{file.name} is out of sequence"
                    f" (expected step {number:04d})"
                )
            found.append(Step(component, number, file.name, file.read_bytes()))
        steps[component] = tuple(found)
    return steps


def latest(steps: Steps) -> dict[str, int]:
    """The version of each component these steps write."""
    return {component: len(items) for component, items in steps.items()}


class SchemaTarget(Protocol):
    """What the runner needs of one backend connection."""

    def step(self) -> AbstractContextManager[None]:
        """One transaction under the backend's migration lock (if it has one): committed when
        the block ends, rolled back when it raises."""
        ...

    def versions(self) -> dict[str, int]:
        """The recorded version of each component, creating the version table if needed."""
        ...

    def apply(self, step: Step) -> None:
        """Run the step's whole script in the open transaction."""
        ...

    def record(self, component: str, version: int) -> None:
        """Record ``component``'s version in the open transaction."""
        ...


def check(stored: Mapping[str, int], steps: Steps, name: str) -> None:
    """Refuse a database written by a newer release.

    Raises:
        SchemaTooNew: a component the code does not know, or a version newer than the code's.
    """
    for component, version in sorted(stored.items()):
        if component not in steps:
            raise SchemaTooNew(
                f"{name}: it holds a component this broker does not know ({component!r}, schema"
                f" version {version}): it was written by a newer release"
            )
        if version > len(steps[component]):
            raise SchemaTooNew(
                f"{name}: its {component} schema version {version} is newer than this broker's"
                f" ({len(steps[component])}): it was written by a newer release"
            )


def migrate(target: SchemaTarget, steps: Steps, name: str) -> list[str]:
    """Bring every component's schema up to date, one transaction per step; returns the steps
    applied (``component vN``), none when the database was up to date (or another instance did
    them meanwhile). ``name`` names the database in messages.

    Raises:
        SchemaTooNew: the database was written by a newer release; nothing was changed.
    """
    applied: list[str] = []
    while True:
        with target.step():
            stored = target.versions()
            check(stored, steps, name)
            pending = next(
                (
                    items[stored.get(component, 0)]
                    for component, items in steps.items()
                    if stored.get(component, 0) < len(items)
                ),
                None,
            )
            if pending is None:
                return applied
            target.apply(pending)
            target.record(pending.component, pending.version)
        applied.append(f"{pending.component} v{pending.version}")

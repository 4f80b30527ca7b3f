"""The suite's lanes: the markers of the tests that need a heavy real thing (registered for the
suite by ``tests/conftest.py``; the markers themselves are declared in ``pyproject.toml``).

- ``postgres``: a real PostgreSQL (the ``postgres`` server fixture).
- ``spark``: a real local SparkSession, or a feed process that starts one.
- ``browser``: the system Chromium, driven by Playwright (the console's ``browser`` fixture).
- ``container``: an image built and run with podman/buildah.

The fast lane leaves them out: ``pytest -m "not postgres and not spark and not browser and not
container"``; a plain ``pytest`` runs everything. A test that takes one of the fixtures in
:data:`FIXTURE_MARKERS` (directly or through another fixture) gets its marker at collection, so
the marker cannot be forgotten there; a test that reaches PostgreSQL only through a parameter
(``request.getfixturevalue``, as the backend-parametrized suites do) carries the marker on that
parameter, and the database fixtures refuse a test that does not (:func:`require_marker`).

Under pytest-xdist (``-n N --dist loadgroup``) every worker is a session of its own and starts
the session-scoped servers its tests ask for. The tests of a server that is slow to start
(:data:`GROUPS`: Spark's session, RabbitMQ, the console's browser, a container image) are put
in one ``xdist_group``, so one worker starts (or builds) it once and runs them all; every other
test goes to whichever worker is free.

A test marked ``alone`` measures time or throughput against a bound (a latency, a start-up
time, how fast a writer fills a file): under pytest-xdist it runs while no other test runs, as
in a serial run, so that the other workers' tests do not take its CPU (:class:`Gate`). The other
workers wait for it; it waits for the tests they are running to end.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Fixture name -> the marker every test that uses it carries.
FIXTURE_MARKERS = {"postgres": "postgres", "spark": "spark", "browser": "browser"}

#: xdist group -> the markers whose tests it holds (the first that applies wins).
GROUPS = {"spark": ("spark",), "rabbitmq": ("amqp",), "browser": ("browser",), "container": ("container",)}

#: Fixture name -> the marker that says a test needs it (for the groups: RabbitMQ's tests are
#: marked ``amqp``; a test that takes the ``rabbitmq`` fixture directly is given the marker).
SERVER_MARKERS = {"rabbitmq": "amqp"}


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects on the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the markers of the heavy fixtures it uses, and, under pytest-xdist,
    with the group of the slow-to-start server it needs."""
    _unique_ids(items)
    grouped = config.pluginmanager.hasplugin("xdist")
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, marker in {**FIXTURE_MARKERS, **SERVER_MARKERS}.items():
            if fixture in used and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
        if not grouped or item.get_closest_marker("xdist_group") is not None:
            continue
        for group, markers in GROUPS.items():
            if any(item.get_closest_marker(marker) is not None for marker in markers):
                item.add_marker(pytest.mark.xdist_group(group))
                if config.getvalue("loadgroup"):
                    _set_id(item, f"{item.nodeid}@{group}")
                break


def _set_id(item: pytest.Item, nodeid: str) -> None:
    """Change a test's id at collection. ``--dist loadgroup`` schedules by the ``@group`` suffix
    of the ids; pytest-xdist 3.8 adds it to ``_nodeid``, which pytest 9 no longer reads (the id
    is a ``NodeId`` in ``_id``), so without this every test of a group would go its own way."""
    item._id = item._id.parse(nodeid)


def _unique_ids(items: list[pytest.Item]) -> None:
    """Give every test an id of its own. pytest-xdist tells its workers which tests to run by
    id, so tests that share one would all run as the first of them: schemathesis gives each API
    operation's test the function's id (``test_x``) and the operation only in its name
    (``test_x[GET /subscriptions]``), so such a test takes its parent's id and its name. Ids
    still shared after that stop the run rather than let tests go missing."""
    counts = collections.Counter(item.nodeid for item in items)
    for item in items:
        named = item.nodeid.rsplit("::", 1)[-1] == item.name
        if counts[item.nodeid] > 1 and item.parent is not None and not named:
            _set_id(item, f"{item.parent.nodeid}::{item.name}")
    shared = sorted(nodeid for nodeid, n in collections.Counter(i.nodeid for i in items).items() if n > 1)
    if shared:
        raise pytest.UsageError(f"tests share an id, so a parallel run would skip some: {shared[:5]}")


def require_marker(request: pytest.FixtureRequest, marker: str) -> None:
    """Fail the requesting test unless it carries ``marker`` (for fixtures a test may reach by
    name at run time, which the collection cannot see)."""
    if request.node.get_closest_marker(marker) is None:
        pytest.fail(
            f"{request.node.nodeid} uses a {marker} fixture without the {marker!r} marker: mark the"
            f" test or its parameter (pytest.param(..., marks=pytest.mark.{marker})) so that the"
            " lanes (-m) select it",
            pytrace=False,
        )


class Gate:
    """A readers-writer lock over the workers of one run: every test holds it shared, a test
    marked ``alone`` holds it exclusively. It is ``flock`` on two files in a directory the
    workers of the run share. A turnstile (taken briefly by every test on its way in, and held
    by an ``alone`` test until it has the gate) keeps a stream of shared holders from starving
    the exclusive one.
    """

    def __init__(self, directory: Path) -> None:
        self._turnstile = directory / "lanes.turnstile"
        self._gate = directory / "lanes.gate"

    @contextlib.contextmanager
    def hold(self, *, exclusive: bool) -> Iterator[None]:
        """Hold the gate (exclusively: alone) for the block."""
        with self._turnstile.open("a") as turnstile, self._gate.open("a") as gate:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            try:
                fcntl.flock(gate, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            finally:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)


_GATE = pytest.StashKey[Gate]()


def pytest_configure(config: pytest.Config) -> None:
    """On a pytest-xdist worker, open the run's gate. The workers' temporary directories are
    ``<run's directory>/popen-gwN``; the run's directory is theirs alone, new for every run."""
    if hasattr(config, "workerinput") and config.option.basetemp:
        config.stash[_GATE] = Gate(Path(config.option.basetemp).parent)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Run each test (setup, call and teardown) holding the gate: exclusively if it is marked
    ``alone``."""
    gate = item.config.stash.get(_GATE, None)
    if gate is None:
        yield
        return
    with gate.hold(exclusive=item.get_closest_marker("alone") is not None):
        yield

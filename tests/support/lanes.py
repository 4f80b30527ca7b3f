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
"""

from __future__ import annotations

import pytest

#: Fixture name -> the marker every test that uses it carries.
FIXTURE_MARKERS = {"postgres": "postgres", "spark": "spark", "browser": "browser"}


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects on the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the markers of the heavy fixtures it uses."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in used and item.get_closest_marker(marker) is None:
                item.add_marker(marker)


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

"""Pagination (xRegistry pagination: ``limit`` and ``Link: <url>;rel=next;count=N``) and
``?sort`` on every collection: groups, resources, versions."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

CORE = "https://github.com/xregistry/spec/blob/main/core/spec.md#"
NEXT = re.compile(r"<([^>]+)>;rel=next;count=(\d+)")


def _pages(client: TestClient, url: str) -> tuple[list[list[str]], set[int]]:
    """Every page's ids, following ``rel=next``, and the counts the links gave."""
    pages: list[list[str]] = []
    counts: set[int] = set()
    next_url: str | None = url
    while next_url is not None:
        r = client.get(next_url)
        assert r.status_code == 200, r.text
        pages.append(list(r.json()))
        found = NEXT.search(r.headers.get("link", ""))
        assert "rel=xregistry-root" in r.headers["link"]
        next_url = found.group(1) if found else None
        if found:
            counts.add(int(found.group(2)))
        assert len(pages) < 100
    return pages, counts


@pytest.mark.parametrize(
    "collection",
    ["/messagegroups", "/messagegroups/g0/messages", "/schemagroups/s/schemas/doc/versions"],
)
def test_pages_cover_the_collection_once(client: TestClient, collection: str) -> None:
    for n in range(23):
        client.put(f"/messagegroups/g{n}", json={"name": f"group {n:02d}"})
        client.put(f"/messagegroups/g0/messages/m{n}", json={"name": f"message {n}"})
        client.post(
            "/schemagroups/s/schemas/doc", content=b"{}", headers={"content-type": "application/json"}
        )
    whole = client.get(collection).json()
    pages, counts = _pages(client, f"{collection}?limit=10")
    assert [len(p) for p in pages] == [10, 10, 3]
    ids = [i for p in pages for i in p]
    assert sorted(ids) == sorted(whole)
    assert ids == sorted(whole, key=str.lower)  # paginated: ordered by id
    assert counts == {23}


def test_sort_by_an_attribute(client: TestClient) -> None:
    for gid, name, size in (("a", "Beta", 3), ("b", "alpha", 10), ("c", "gamma", 2), ("d", None, None)):
        body = {} if name is None else {"name": name, "labels": {}, "documentation": f"https://x/{size}"}
        client.put(f"/messagegroups/{gid}", json=body)
    assert list(client.get("/messagegroups?sort=name").json()) == ["b", "a", "c", "d"]
    assert list(client.get("/messagegroups?sort=name=desc").json()) == ["c", "a", "b", "d"]
    # with a limit the sorted order is cut into pages
    pages, _ = _pages(client, "/messagegroups?sort=name=desc&limit=2")
    assert pages == [["c", "a"], ["b", "d"]]
    assert list(client.get("/messagegroups?sort=epoch").json()) == ["a", "b", "c", "d"]


def test_bad_paging_flags(client: TestClient) -> None:
    client.put("/messagegroups/a", json={})
    for query in ("limit=0", "limit=x", "limit=100001", "offset=-1"):
        r = client.get(f"/messagegroups?{query}")
        assert r.status_code == 400, query
        assert r.json()["type"] == CORE + "bad_flag"
    r = client.get("/messagegroups?sort=name=sideways")
    assert r.json()["type"] == CORE + "bad_sort"
    r = client.get("/messagegroups/a?limit=1")
    assert r.json()["type"] == CORE + "bad_flag"
    caps = client.get("/capabilities").json()
    assert caps["pagination"] is True
    assert "sort" in caps["flags"]

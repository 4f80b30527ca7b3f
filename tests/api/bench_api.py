"""Benchmark of the Subscriptions API in process (httpx over ASGI); prints figures, asserts nothing.

    .venv/bin/python tests/api/bench_api.py [--subscriptions N]

The baseline, measured in the same run on the same kind of file, is the store alone: the ratio
is what HTTP handling, JSON and validation (filters compiled, sender checks) add per request.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from cebroker.api.admission import realize
from cebroker.app import admission_rules, create_app
from cebroker.settings import Settings
from cebroker.storage import create_storage


def _body(i: int) -> dict[str, Any]:
    return {
        "protocol": "HTTP",
        # An address, not a name: a create resolves a name to check it against the allowed
        # networks, and a lookup that has no answer would be timed instead of the API.
        "sink": f"https://93.184.216.34/{i}",
        "source": f"/source/{i % 50}",
        "types": [f"com.example.type{i % 100}"],
        "filters": [{"all": [{"prefix": {"subject": "eu/"}}, {"not": {"exact": {"type": "x"}}}]}],
        "sinkcredential": {"credentialtype": "PLAIN", "identifier": "u", "secret": "s"},
    }


def _report(label: str, count: int, seconds: float) -> float:
    rate = count / seconds
    print(f"{label:<52} {count:>6} in {seconds:7.3f} s  {rate:9.0f}/s")
    return rate


async def main(total: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        storage = create_storage(Path(tmp) / "baseline.db")
        await storage.open()
        store = storage.subscriptions
        rules = admission_rules()
        t0 = time.perf_counter()
        for i in range(total):
            await store.create(realize(_body(i), rules=rules, subscription_id=str(uuid.uuid4())))
        baseline = _report("baseline: validate + store.create", total, time.perf_counter() - t0)
        await storage.close()

        app = create_app(Settings(db=Path(tmp) / "api.db"))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                t0 = time.perf_counter()
                for i in range(total):
                    r = await client.post("/subscriptions", json=_body(i))
                    assert r.status_code == 201, r.text
                api = _report("POST /subscriptions (sequential)", total, time.perf_counter() - t0)
                print(f"HTTP + JSON overhead: the API runs at {api / baseline:.2f}x the baseline rate")

                t0 = time.perf_counter()
                pages = 0
                url: str | None = "/subscriptions?limit=100"
                while url:
                    r = await client.get(url)
                    pages += 1
                    link = r.headers.get("link")
                    url = link[1 : link.index(">")] if link else None
                _report("GET /subscriptions, every page of 100", pages, time.perf_counter() - t0)

                t0 = time.perf_counter()
                for i in range(200):
                    r = await client.get("/subscriptions", params={"type": f"com.example.type{i % 100}"})
                    assert r.status_code == 200
                _report(
                    f"GET /subscriptions?type= ({total // 100} of {total} match)",
                    200,
                    time.perf_counter() - t0,
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscriptions", type=int, default=1000)
    asyncio.run(main(parser.parse_args().subscriptions))

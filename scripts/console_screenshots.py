"""Takes the screenshots of docs/console.md: a broker with a few subscriptions, events, dead
letters and registry entries, each console page in Debian's Chromium at a laptop's size.

Run from the repository root: ``.venv/bin/python scripts/console_screenshots.py``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from console.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from support.servers import ServerThread  # noqa: E402
from support.sinks import Reply, Sink  # noqa: E402

from cebroker.app import create_app  # noqa: E402
from cebroker.settings import Settings  # noqa: E402

OUT = ROOT / "docs" / "images"


def seed(http: httpx.Client, sink: str) -> str:
    """Subscriptions, a stream of events, a few dead letters and a small registry."""
    orders = http.post(
        "/subscriptions",
        json={
            "protocol": "HTTP",
            "sink": f"{sink}/orders",
            "source": "/shop",
            "types": ["com.example.order.created"],
            "filters": [{"prefix": {"subject": "eu/"}}, {"sql": "amount > 100"}],
            "protocolsettings": {"headers": {"x-team": "billing"}},
            "sinkcredential": {"credentialtype": "PLAIN", "identifier": "billing", "secret": "never-shown"},
        },
    ).json()["id"]
    http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink}/audit"})
    http.post(
        "/subscriptions",
        json={"protocol": "HTTP", "sink": f"{sink}/refunds", "types": ["com.example.refund"]},
    )
    for n in range(40):
        event = {
            "specversion": "1.0",
            "id": f"o-{n}",
            "source": "/shop",
            "type": "com.example.order.created" if n % 4 else "com.example.refund",
            "subject": "eu/de" if n % 3 else "us/ny",
            "amount": 50 + 10 * n,
        }
        http.post("/events", json=event, headers={"content-type": "application/cloudevents+json"})
    http.put("/messagegroups/orders", json={"envelope": "CloudEvents/1.0", "description": "Order events"})
    http.put(
        "/messagegroups/orders/messages/com.example.order.created",
        json={
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "com.example.order.created"}},
            "dataschemaformat": "JsonSchema/draft-07",
            "dataschemauri": "/schemagroups/orders/schemas/order",
        },
    )
    for document in (b'{"type": "object"}', b'{"type": "object", "required": ["amount"]}'):
        http.post(
            "/schemagroups/orders/schemas/order",
            content=document,
            headers={"content-type": "application/json", "xRegistry-format": "JsonSchema/draft-07"},
        )
    return str(orders)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    sink = Sink()
    sink.default["/refunds"] = Reply(status=422, body=b'{"error": "unknown order"}')
    with tempfile.TemporaryDirectory() as tmp, ServerThread(sink) as sink_server:
        sink.url = sink_server.url
        app = create_app(Settings(db=Path(tmp) / "shots.db", webhook_validation=False))
        with ServerThread(app) as broker, httpx.Client(base_url=broker.url, timeout=10) as http:
            orders = seed(http, sink.url)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1366, "height": 860})
                page.goto(f"{broker.url}/console#/")
                for n in range(40, 240):  # events flowing while the overview draws its chart
                    http.post(
                        "/events",
                        json={"specversion": "1.0", "id": f"o-{n}", "source": "/shop", "type": "t"},
                        headers={"content-type": "application/cloudevents+json"},
                    )
                    time.sleep(0.1)
                page.screenshot(path=OUT / "console-overview.png")
                shots = {
                    "console-subscriptions.png": "#/subscriptions",
                    "console-subscription.png": f"#/subscriptions/{orders}",
                    "console-registry.png": "#/registry",
                }
                for name, fragment in shots.items():
                    page.goto(f"{broker.url}/console{fragment}")
                    page.wait_for_load_state("networkidle")
                    page.locator("main h1").wait_for()
                    page.screenshot(path=OUT / name, full_page=True)
                page.goto(f"{broker.url}/console#/new")
                page.get_by_label("Sink", exact=True).fill("ftp://hooks.example.com/orders")
                page.get_by_label("Filters", exact=True).fill('[{"sql": "amount >"}]')
                page.get_by_role("button", name="Create subscription").click()
                page.locator("#err-sink").wait_for()
                page.get_by_label("CloudEvent (JSON)").fill(
                    '{"specversion": "1.0", "id": "1", "source": "/shop", "type": "t", "time": "soon"}'
                )
                page.screenshot(path=OUT / "console-create.png", full_page=True)
                browser.close()
    print("screenshots written to", OUT)


if __name__ == "__main__":
    main()

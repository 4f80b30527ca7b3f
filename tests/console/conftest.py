"""The console in the system Chromium, driven by Playwright, against a real broker and sink.

Playwright's own browser download is never used: the browser is Debian's ``chromium``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from support.broker import Broker
from support.sinks import Sink

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

if not Path(CHROMIUM).exists():
    pytest.skip("Debian's chromium is not installed (scripts/install-servers.sh)", allow_module_level=True)


@dataclass
class Console:
    """A broker, its sink, an HTTP client of it and a browser page with its console messages."""

    url: str
    http: httpx.Client
    sink: Sink
    page: Page
    errors: list[str] = field(default_factory=list)

    def open(self, fragment: str = "#/") -> None:
        self.page.goto(f"{self.url}/console{fragment}")

    def send(self, n: int, **extra: object) -> None:
        event = {
            "specversion": "1.0",
            "id": f"c-{n}",
            "source": "/console",
            "type": "com.example.console",
            **extra,
        }
        r = self.http.post("/events", json=event, headers={"content-type": "application/cloudevents+json"})
        assert r.status_code == 202, r.text


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def console(
    browser: Browser, tmp_path: Path, sink: Sink, make_broker: Callable[..., Broker]
) -> Iterator[Console]:
    broker = make_broker(db=tmp_path / "console.db")
    context = browser.new_context(viewport={"width": 1366, "height": 860})
    page = context.new_page()
    page.set_default_timeout(15_000)
    # expect() has a timeout of its own (5 s unless set), which the page's does not change: too
    # short for a view that refreshes every 3 s to show what a loaded broker has just recorded.
    expect.set_options(timeout=15_000)
    handle = Console(broker.url, httpx.Client(base_url=broker.url, timeout=10), sink, page)
    page.on("console", lambda m: handle.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: handle.errors.append(str(e)))
    yield handle
    handle.http.close()
    context.close()

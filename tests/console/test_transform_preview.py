"""The subscription editor previews a transformation as it is typed (real Chromium): the request
the sink would get, then a drop, then a failure, without pressing a button; what it shows is
what the sink then receives."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from console.conftest import Console

EVENT = {
    "specversion": "1.0",
    "id": "p-1",
    "source": "/console",
    "type": "com.example.console",
    "datacontenttype": "application/json",
    "data": {"order": 7, "secret": "s"},
}
SHAPE = (
    '{"type": "t.partner", "source": "/p", "data": {"order": event.data.order}, "$delivery": {"path": "/o"}}'
)


def config(cel: str) -> str:
    return json.dumps({"transform": {"cel": cel}})


def test_the_editor_previews_the_transformation_as_it_is_typed(console: Console) -> None:
    page = console.page
    console.open("#/new")
    page.get_by_label("Sink", exact=True).fill(f"{console.sink.url}/in")
    page.get_by_label("Protocol settings", exact=True).fill('{"contentmode": "structured"}')
    page.get_by_label("CloudEvent (JSON)").fill(json.dumps(EVENT))
    page.get_by_label("Config", exact=True).fill(config(SHAPE))
    expect(page.locator("[data-transform]")).to_have_attribute("data-transform", "delivered")
    expect(page.locator("[data-transform]")).to_contain_text(f"{console.sink.url}/in/o")
    shown = page.locator("[data-transform-part=message]").inner_text()
    body = shown.split("\n\n", 1)[1]
    assert json.loads(body) == {
        "type": "t.partner",
        "source": "/p",
        "data": {"order": 7},
        "specversion": "1.0",
        "id": "p-1",
    }

    page.get_by_label("Config", exact=True).fill(config("null"))
    expect(page.locator("[data-transform]")).to_have_attribute("data-transform", "dropped")
    page.get_by_label("Config", exact=True).fill(config("event.data.nope"))
    expect(page.locator("[data-transform]")).to_have_attribute("data-transform", "failed")
    expect(page.locator("[data-transform]")).to_contain_text("nope")
    page.get_by_label("Config", exact=True).fill(config('{"type": '))
    expect(page.locator("[data-preview-error]")).to_contain_text("/subscription/config/transform")

    page.get_by_label("Config", exact=True).fill(config(SHAPE))
    expect(page.locator("[data-transform]")).to_have_attribute("data-transform", "delivered")
    page.get_by_role("button", name="Create subscription").click()
    expect(page.locator("h1")).to_contain_text("Subscription")
    response = console.http.post(
        "/events", json=EVENT, headers={"content-type": "application/cloudevents+json"}
    )
    assert response.status_code == 202, response.text
    (got,) = console.sink.wait("/in/o", 1)
    assert got.body.decode() == body
    # The refused draft's 400 is logged by the browser as a failed load; nothing else may be.
    assert [e for e in console.errors if "status of 400" not in e] == []

"""The console in a real browser: creating a subscription with a validation error shown next to
its field, live counts rising while events flow, a dead letter redriven, the token prompt on a
401, the explain tester, and no console error on any page."""

from __future__ import annotations

import re

from playwright.sync_api import expect
from support.sinks import Reply

from console.conftest import Console

PAGES = ["#/", "#/subscriptions", "#/new", "#/registry"]


def test_create_shows_the_api_error_next_to_its_field(console: Console) -> None:
    console.open("#/new")
    page = console.page
    page.get_by_label("Protocol", exact=True).select_option("HTTP")
    page.get_by_label("Sink", exact=True).fill("ftp://sink.example/in")
    page.get_by_label("Filters", exact=True).fill('[{"sql": "amount >"}]')
    page.get_by_role("button", name="Create subscription").click()
    sink_error = page.locator("#err-sink")
    expect(sink_error).to_be_visible()
    expect(sink_error).to_contain_text("protocol HTTP needs a sink scheme of http, https")
    expect(page.get_by_label("Sink", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#err-filters")).to_contain_text("/filters/0/sql")
    expect(page.locator("#err-protocol")).to_be_hidden()
    assert console.http.get("/subscriptions").json() == []  # refused: nothing stored

    page.get_by_label("Sink", exact=True).fill(f"{console.sink.url}/in")
    page.get_by_label("Filters", exact=True).fill('[{"sql": "amount > 100"}]')
    page.get_by_label("Types", exact=True).fill("com.example.console")
    page.get_by_role("button", name="Create subscription").click()
    expect(page).to_have_url(re.compile(r"#/subscriptions/[0-9a-f-]{36}$"))
    created = console.http.get("/subscriptions").json()
    assert [s["sink"] for s in created] == [f"{console.sink.url}/in"]
    assert created[0]["filters"] == [{"sql": "amount > 100"}]
    expect(page.get_by_role("heading", name=re.compile("^Subscription "))).to_be_visible()


def test_explain_tester_on_a_draft_and_a_stored_subscription(console: Console) -> None:
    sub = console.http.post(
        "/subscriptions",
        json={
            "protocol": "HTTP",
            "sink": f"{console.sink.url}/in",
            "filters": [{"prefix": {"subject": "eu/"}}],
        },
    ).json()
    console.open(f"#/subscriptions/{sub['id']}")
    page = console.page
    page.get_by_label("CloudEvent (JSON)").fill(
        '{"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "subject": "us/42"}'
    )
    page.get_by_role("button", name="Explain").click()
    expect(page.locator("[data-verdict]")).to_have_attribute("data-verdict", "refused")
    row = page.locator('tr[data-pointer="/filters/0"]')
    expect(row).to_contain_text("prefix of subject: 'eu/' does not start 'us/42'")

    console.open("#/new")
    page.get_by_label("Sink", exact=True).fill("https://sink.example/x")
    page.get_by_label("Source", exact=True).fill("/s")
    page.get_by_label("CloudEvent (JSON)").fill(
        '{"specversion": "1.0", "id": "1", "source": "/s", "type": "t"}'
    )
    page.get_by_role("button", name="Explain", exact=True).click()
    expect(page.locator("[data-verdict]")).to_have_attribute("data-verdict", "matched")
    page.get_by_label("CloudEvent (JSON)").fill(
        '{"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "time": "x"}'
    )
    page.get_by_role("button", name="Explain", exact=True).click()
    expect(page.locator("#err-event")).to_contain_text("/time: must be an RFC 3339 timestamp")


def test_live_counts_rise_while_events_flow(console: Console) -> None:
    console.http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{console.sink.url}/in"})
    console.open("#/")
    events = console.page.locator('[data-metric="events"]')
    deliveries = console.page.locator('[data-metric="deliveries"]')
    expect(events).not_to_have_text("—")
    start = int(events.inner_text().replace(",", ""))
    for n in range(5):
        console.send(n)
    expect(events).to_have_text(str(start + 5))
    expect(deliveries).to_have_text("5")
    for n in range(5, 12):
        console.send(n)
    expect(events).to_have_text(str(start + 12))
    expect(deliveries).to_have_text("12")
    expect(console.page.locator('[data-rate="events"]')).to_have_text(re.compile(r"^\d+\.\d /s$"))

    console.open("#/subscriptions")
    expect(console.page.locator('td[data-col="delivered"]')).to_have_text("12")


def test_a_dead_letter_is_redriven(console: Console) -> None:
    console.sink.default["/flaky"] = Reply(status=400, body=b"not now")
    sub = console.http.post(
        "/subscriptions", json={"protocol": "HTTP", "sink": f"{console.sink.url}/flaky"}
    ).json()
    console.send(1)
    console.send(2)
    console.open(f"#/subscriptions/{sub['id']}")
    page = console.page
    expect(page.locator("table[data-deadletters]")).to_have_attribute("data-deadletters", "2")
    expect(page.locator('[data-status="deadlettered"]')).to_have_text("2")
    console.sink.default["/flaky"] = Reply(status=200)
    page.get_by_label(re.compile(r"^Select dead letter \d+$")).first.check()
    page.get_by_role("button", name="Redrive selected (1)").click()
    expect(page.locator("table[data-deadletters]")).to_have_attribute("data-deadletters", "1")
    page.get_by_role("button", name="Redrive all (1)").click()
    expect(page.locator('[data-deadletters="0"]')).to_have_text("No dead letters.")
    ids = sorted({r.headers["ce-id"] for r in console.sink.wait("/flaky", 4)})
    assert ids == ["c-1", "c-2"]
    expect(page.locator('[data-status="delivered"]')).to_have_text("2")


def test_a_sink_that_is_down_shows_its_circuit(console: Console) -> None:
    console.sink.default["/down"] = Reply(status=503)
    sub = console.http.post(
        "/subscriptions", json={"protocol": "HTTP", "sink": f"{console.sink.url}/down"}
    ).json()
    for n in range(8):
        console.send(n)
    console.open("#/subscriptions")
    cell = console.page.locator('td[data-col="circuit"]')
    expect(cell).to_have_attribute("data-circuit", re.compile(r"^(open|probing)$"))
    expect(cell).to_have_text(re.compile(r"^down since "))
    expect(cell).to_have_attribute("title", re.compile(r"sink answered 503$"))
    console.open(f"#/subscriptions/{sub['id']}")
    fact = console.page.locator("span[data-circuit]")
    expect(fact).to_contain_text("the backlog waits")
    expect(fact).to_contain_text("Last error: sink answered 503")
    console.sink.default["/down"] = Reply(status=200)  # the next probe closes it
    expect(fact).to_have_text("up: deliveries flow")
    expect(console.page.locator('[data-status="delivered"]')).to_have_text("8")


def test_live_tail_shows_matched_events(console: Console) -> None:
    sub = console.http.post(
        "/subscriptions",
        json={
            "protocol": "HTTP",
            "sink": f"{console.sink.url}/in",
            "filters": [{"exact": {"subject": "yes"}}],
        },
    ).json()
    console.open(f"#/subscriptions/{sub['id']}")
    page = console.page
    page.get_by_role("button", name="Start live tail").click()
    expect(page.get_by_text("Watching:")).to_be_visible()
    console.send(1, subject="no")
    console.send(2, subject="yes")
    expect(page.locator("ol.tail li")).to_have_count(1)
    expect(page.locator("ol.tail li")).to_have_attribute("data-event-id", "c-2")
    page.get_by_role("button", name="Stop live tail").click()
    expect(page.get_by_text("Stopped.")).to_be_visible()


def test_live_tail_shows_the_trace_id(console: Console) -> None:
    """Each tailed event shows the id of its trace (here named by its ``traceparent``)."""
    sub = console.http.post(
        "/subscriptions", json={"protocol": "HTTP", "sink": f"{console.sink.url}/in"}
    ).json()
    console.open(f"#/subscriptions/{sub['id']}")
    page = console.page
    page.get_by_role("button", name="Start live tail").click()
    expect(page.get_by_text("Watching:")).to_be_visible()
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    console.send(3, traceparent=f"00-{trace_id}-00f067aa0ba902b7-01")
    console.send(4)
    expect(page.locator("ol.tail li")).to_have_count(2)
    expect(page.locator('ol.tail li[data-event-id="c-3"]')).to_have_attribute("data-trace-id", trace_id)
    expect(page.locator('ol.tail li[data-event-id="c-3"]')).to_contain_text(f"trace {trace_id}")
    expect(page.locator('ol.tail li[data-event-id="c-4"]')).to_have_attribute("data-trace-id", "")


def test_the_console_asks_for_a_token_on_401(console: Console) -> None:
    """Authentication is not the console's: a broker behind a gate that wants a bearer token is
    enough to show that the console asks once, keeps the token for the tab and sends it."""
    seen: list[str] = []

    def gate(route: object) -> None:
        from playwright.sync_api import Route

        assert isinstance(route, Route)
        auth = route.request.headers.get("authorization", "")
        seen.append(auth)
        if auth != "Bearer t0ken":
            route.fulfill(status=401, content_type="application/problem+json", body='{"status": 401}')
        else:
            route.continue_()

    console.page.route(re.compile(r".*/status$"), gate)
    console.open("#/")
    dialog = console.page.get_by_role("dialog", name="Sign in")
    expect(dialog).to_be_visible()
    console.page.get_by_label("Bearer token").fill("t0ken")
    console.page.get_by_role("button", name="Use token").click()
    expect(console.page.locator('[data-metric="subscriptions"]')).to_have_text("0")
    assert console.page.evaluate("sessionStorage.getItem('cebroker.token')") == "t0ken"
    assert "Bearer t0ken" in seen
    console.errors.clear()  # the refused calls were meant to be refused


def test_no_console_errors_on_any_page(console: Console) -> None:
    sub = console.http.post(
        "/subscriptions", json={"protocol": "HTTP", "sink": f"{console.sink.url}/in"}
    ).json()
    console.http.put(
        "/messagegroups/orders", json={"envelope": "CloudEvents/1.0", "description": "Order events"}
    )
    console.http.put(
        "/schemagroups/orders/schemas/order",
        content=b'{"type": "object"}',
        headers={"content-type": "application/json", "xRegistry-format": "JsonSchema/draft-07"},
    )
    console.send(1)
    for fragment in [*PAGES, f"#/subscriptions/{sub['id']}", f"#/subscriptions/{sub['id']}/edit"]:
        console.open(fragment)
        expect(console.page.locator("main h1")).to_be_visible()
        console.page.wait_for_load_state("networkidle")
    console.open("#/registry")
    console.page.get_by_role("button", name="Show version 1").click()
    expect(console.page.locator("pre.document")).to_contain_text('"type": "object"')
    assert console.errors == []


def test_keyboard_reaches_the_navigation_and_the_skip_link(console: Console) -> None:
    console.open("#/subscriptions")
    page = console.page
    page.keyboard.press("Tab")
    expect(page.locator("#skip")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    expect(page.get_by_role("link", name="Subscriptions")).to_have_attribute("aria-current", "page")


def test_api_reference_renders_from_local_assets(console: Console) -> None:
    requested: list[str] = []
    console.page.on("request", lambda r: requested.append(r.url))
    console.page.goto(f"{console.url}/docs")
    expect(console.page.get_by_text("/subscriptions/{id}").first).to_be_visible()
    assert all(url.startswith(console.url) for url in requested), requested  # nothing from elsewhere
    assert console.errors == []

"""What each management command does. Every handler gets the parsed arguments and a client of the
broker, prints its result and raises :class:`CommandError` when anything fails."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from httpx_sse import EventSource

from cebroker.client import render
from cebroker.client.connection import BrokerClient, CommandError
from cebroker.client.inputs import BAD_INPUT, pairs, parse_json, read_json

#: A command: the parsed arguments and a client of the broker.
Handler = Callable[[argparse.Namespace, BrokerClient], None]

_STRUCTURED = "application/cloudevents+json"
_BATCH = "application/cloudevents-batch+json"
#: Subscriptions fetched per request by ``subscriptions list``.
_PAGE = 1000


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(part, safe="") for part in parts)


# -- subscriptions ---------------------------------------------------------------------------


def list_subscriptions(args: argparse.Namespace, client: BrokerClient) -> None:
    """``subscriptions list``: every page, filtered as asked."""
    params: dict[str, Any] = {k: getattr(args, k) for k in ("protocol", "source", "type", "sink")}
    params = {k: v for k, v in params.items() if v is not None}
    wanted = args.limit
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    while wanted is None or len(found) < wanted:
        page_size = _PAGE if wanted is None else min(_PAGE, wanted - len(found))
        query = {**params, "limit": page_size, **({"cursor": cursor} if cursor else {})}
        response = client.call("GET", "/subscriptions", params=query)
        found.extend(response.json())
        cursor = response.links.get("next", {}).get("url")
        if not cursor:
            break
        cursor = _cursor_of(cursor)
    if args.json:
        render.dump(found)
        return
    render.table(
        ("ID", "PROTOCOL", "SINK", "SOURCE", "TYPES", "FILTERS"),
        [
            (
                s["id"],
                s["protocol"],
                s.get("sink"),
                s.get("source"),
                s.get("types"),
                len(s.get("filters", [])),
            )
            for s in found
        ],
    )


def _cursor_of(link: str) -> str | None:
    from urllib.parse import parse_qs, urlsplit

    values = parse_qs(urlsplit(link).query).get("cursor")
    return values[0] if values else None


def get_subscription(args: argparse.Namespace, client: BrokerClient) -> None:
    """``subscriptions get ID``: the subscription, and for people its delivery status too."""
    doc = client.json("GET", _path("subscriptions", args.id))
    if args.json:
        render.dump(doc)
        return
    status = client.json("GET", _path("subscriptions", args.id, "status"))
    render.fields([(name, doc.get(name)) for name in _SHOWN if name in doc])
    print()
    render.fields(
        [
            (name, status.get(name))
            for name in ("delivered", "failed", "pending", "deadlettered", "lastError", "lastErrorAt")
        ]
    )
    replies = status.get("replies")
    if isinstance(replies, dict):  # config.reply: publish (docs/replies.md)
        render.fields(
            [
                (f"replies {name}", replies.get(name))
                for name in ("published", "duplicates", "refused", "lastRefusal")
            ]
        )


_SHOWN = (
    "id",
    "protocol",
    "sink",
    "source",
    "types",
    "filters",
    "protocolsettings",
    "config",
    "sinkcredential",
)


def create_subscription(args: argparse.Namespace, client: BrokerClient) -> None:
    """``subscriptions create [FILE] [--protocol ...]``: print the new id (or the whole answer)."""
    body: Any = read_json(args.file, "the subscription") if args.file else {}
    if not isinstance(body, dict):
        raise CommandError("the subscription must be a JSON object", exit_code=BAD_INPUT)
    for name in ("protocol", "sink", "source", "types"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    filters = [parse_json(text, "--filter") for text in args.filters or ()]
    filters += [{"sql": text} for text in args.sql or ()]
    if filters:
        body["filters"] = [*body.get("filters", []), *filters]
    if args.setting:
        body["protocolsettings"] = {**body.get("protocolsettings", {}), **pairs(args.setting, "--setting")}
    if args.config:
        config = {
            k: v if isinstance(v, str) else json.dumps(v) for k, v in pairs(args.config, "--config").items()
        }
        body["config"] = {**body.get("config", {}), **config}
    created = client.json("POST", "/subscriptions", json_body=body)
    if args.json:
        render.dump(created)
    else:
        print(created["id"])


def delete_subscription(args: argparse.Namespace, client: BrokerClient) -> None:
    """``subscriptions delete ID``."""
    headers = {"If-Match": args.if_match} if args.if_match else None
    gone = client.json("DELETE", _path("subscriptions", args.id), headers=headers)
    if args.json:
        render.dump(gone)
    else:
        print(f"deleted {gone['id']}")


# -- events ----------------------------------------------------------------------------------


def send_events(args: argparse.Namespace, client: BrokerClient) -> None:
    """``events send [FILE]``: one event (structured or binary) or a batch (a JSON array)."""
    doc = read_json(args.file, "the event")
    if isinstance(doc, list):
        if args.mode == "binary":
            raise CommandError("a batch (a JSON array) cannot be sent in binary mode", exit_code=BAD_INPUT)
        response = client.call("POST", "/events", content=_encode(doc), headers={"Content-Type": _BATCH})
    elif not isinstance(doc, dict):
        raise CommandError("the event must be a JSON object (or an array of them)", exit_code=BAD_INPUT)
    elif args.mode == "binary":
        from ceprotocols.http.binding import to_binary

        message = to_binary(doc)
        response = client.call("POST", "/events", content=message.body, headers=message.headers)
    else:
        response = client.call("POST", "/events", content=_encode(doc), headers={"Content-Type": _STRUCTURED})
    answer = response.json()
    if args.json:
        render.dump(answer)
    else:
        print(f"accepted {answer['accepted']}, duplicates {answer['duplicates']}")


def _encode(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


# -- dead letters ----------------------------------------------------------------------------


def receive(args: argparse.Namespace, client: BrokerClient) -> None:
    """``receive SUBSCRIPTION``: events of a PULL subscription under a lock, printed; with
    ``--ack`` acknowledged once printed (otherwise their locks end by themselves)."""
    answer = client.json(
        "POST",
        _path("subscriptions", args.subscription, "receive"),
        params={"max": args.max, "wait": args.wait},
        wait=float(args.wait),
    )
    events: list[dict[str, Any]] = answer["events"]
    if args.json:
        for item in events:
            print(json.dumps(item, separators=(",", ":")))
    else:
        render.table(
            ("ID", "TYPE", "SOURCE", "DELIVERIES", "LOCKED UNTIL", "LOCK TOKEN"),
            [
                (
                    e["event"].get("id"),
                    e["event"].get("type"),
                    e["event"].get("source"),
                    e["deliverycount"],
                    e["lockeduntil"],
                    e["locktoken"],
                )
                for e in events
            ],
        )
    if args.ack and events:
        result = client.json(
            "POST",
            _path("subscriptions", args.subscription, "acknowledge"),
            json_body={"locktokens": [e["locktoken"] for e in events]},
        )
        if result["failed"]:
            lost = ", ".join(f"{f['locktoken']} ({f['reason']})" for f in result["failed"])
            raise CommandError(f"not acknowledged: {lost}")


def list_dead_letters(args: argparse.Namespace, client: BrokerClient) -> None:
    """``deadletters list SUBSCRIPTION``: oldest first, up to ``--limit``."""
    found: list[dict[str, Any]] = []
    after: int | None = 0
    while after is not None and len(found) < args.limit:
        page = client.json(
            "GET",
            _path("subscriptions", args.subscription, "deadletters"),
            params={"limit": min(500, args.limit - len(found)), "after": after},
        )
        found.extend(page["items"])
        after = page["next"]
    if args.json:
        render.dump(found)
        return
    render.table(
        ("ID", "FAILED AT", "ATTEMPTS", "STATUS", "EVENT", "LAST ERROR"),
        [
            (
                d["id"],
                d["failedAt"],
                d["attempts"],
                d["status"],
                f"{d['event'].get('type')} {d['event'].get('id')}",
                d["lastError"],
            )
            for d in found
        ],
    )


def redrive(args: argparse.Namespace, client: BrokerClient) -> None:
    """``deadletters redrive SUBSCRIPTION [--id N ...]``."""
    body = {"ids": args.ids} if args.ids else None
    answer = client.json(
        "POST", _path("subscriptions", args.subscription, "deadletters", "redrive"), json_body=body
    )
    if args.json:
        render.dump(answer)
    else:
        print(f"redriven {answer['redriven']}")


# -- explain and tail ------------------------------------------------------------------------


def explain(args: argparse.Namespace, client: BrokerClient) -> None:
    """``explain SUBSCRIPTION --event FILE`` or ``explain --draft FILE --event FILE``."""
    if (args.subscription is None) == (args.draft is None):
        raise CommandError("give either a SUBSCRIPTION id or --draft FILE", exit_code=BAD_INPUT)
    if args.draft == "-" and args.event == "-":
        raise CommandError("only one of --draft and --event can be read from stdin", exit_code=BAD_INPUT)
    event = read_json(args.event, "the event")
    if args.draft is not None:
        body = {"subscription": read_json(args.draft, "the subscription"), "event": event}
        answer = client.json("POST", "/explain", json_body=body)
    else:
        answer = client.json("POST", _path("subscriptions", args.subscription, "explain"), json_body=event)
    if args.json:
        render.dump(answer)
        return
    print("matched" if answer["matched"] else "not matched")
    render.table(
        ("CONDITION", "RESULT", "DETAIL"),
        [(c["pointer"], "yes" if c["matched"] else "NO", c["detail"]) for c in answer["checks"]],
    )
    outcome = answer.get("transform")
    if isinstance(outcome, dict):
        _transformed(outcome)


def _transformed(outcome: dict[str, Any]) -> None:
    """A transformation's outcome as explain shows it: what the sink would receive, the drop,
    or the failure a dead letter would name."""
    print(f"transform: {outcome.get('outcome')}")
    if outcome.get("outcome") == "failed":
        print(f"  {outcome.get('error', {}).get('reason', '')}")
        return
    for name in ("sink", "delivery", "event"):
        if name in outcome:
            print(f"{name}:")
            print(textwrap.indent(json.dumps(outcome[name], indent=2, ensure_ascii=False), "  "))


def tail(args: argparse.Namespace, client: BrokerClient) -> None:
    """``tail SUBSCRIPTION``: print matched events as they come, until told to stop."""
    shown = 0
    with client.stream(_path("subscriptions", args.subscription, "tail")) as response:
        for message in EventSource(response).iter_sse():
            if message.event == "ready":
                print(f"watching {args.subscription}; Ctrl-C to stop", file=sys.stderr, flush=True)
            elif message.event == "dropped":
                skipped = json.loads(message.data)["dropped"]
                print(f"({skipped} events skipped: reading too slowly)", file=sys.stderr, flush=True)
            elif message.event == "cloudevent":
                event = json.loads(message.data)
                if args.json:  # the event as accepted, nothing added (scripts read it as such)
                    print(json.dumps(event, ensure_ascii=False), flush=True)
                else:
                    # The message's id is the event's trace id, when it has one.
                    parts = [event.get(k) or "-" for k in ("time", "id", "type", "source", "subject")]
                    print("  ".join(str(p) for p in [*parts, f"trace={message.id or '-'}"]), flush=True)
                shown += 1
                if args.count is not None and shown >= args.count:
                    return
    if args.count is not None:
        raise CommandError(f"the stream ended after {shown} of {args.count} events")
    print("the stream ended (the subscription was deleted or the broker stopped)", file=sys.stderr)


# -- running ---------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Run the management command chosen in ``args``; returns the exit status."""
    from cebroker.client.connection import Connection

    handler: Handler = args.handler
    try:
        connection = Connection(url=args.url, token=args.token, timeout=args.timeout)
        with BrokerClient(connection) as client:
            handler(args, client)
    except CommandError as exc:
        for line in render.problem_lines(exc.message, exc.problem):
            print(line, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. piped into head: the reader has all it wants
        return 0
    return 0

"""The arguments of the management commands (``subscriptions``, ``events``, ``deadletters``,
``explain``, ``tail``); each leaf command gets the connection options and ``--json``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TypeAlias

from cebroker.client import commands
from cebroker.client.connection import CONNECTION_OPTIONS
from cebroker.options import Integer, OptionParser, argument_type

_POSITIVE = argument_type(Integer(minimum=1))
_ID = argument_type(Integer(minimum=0))
_MAX_EVENTS = argument_type(Integer(minimum=1, maximum=1000))
_WAIT = argument_type(Integer(minimum=0, maximum=60))
if TYPE_CHECKING:  # argparse's generic is for type checkers only
    Sub: TypeAlias = argparse._SubParsersAction[OptionParser]


def _leaf(sub: Sub, name: str, help: str, handler: commands.Handler, description: str = "") -> OptionParser:
    parser = sub.add_parser(name, help=help, description=description or help)
    parser.add_options(CONNECTION_OPTIONS)
    parser.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")
    parser.set_defaults(handler=handler)
    return parser


def add_client_commands(sub: Sub) -> None:
    """Add the management commands to the ``cebroker`` command line."""
    _add_subscriptions(sub)
    _add_events(sub)
    _add_deadletters(sub)
    p = _leaf(
        sub,
        "explain",
        "say which condition of a subscription accepts or refuses an event",
        commands.explain,
        "Evaluate one CloudEvent against a stored subscription (SUBSCRIPTION is its id) or, with "
        "--draft, against a subscription body that is not stored; prints each condition's verdict. "
        "Exits 0 whether the event matches or not.",
    )
    p.add_argument("subscription", nargs="?", metavar="SUBSCRIPTION", help="id of a stored subscription")
    p.add_argument("--draft", metavar="FILE", help="a subscription body (JSON file, - for stdin) to try")
    p.add_argument("--event", required=True, metavar="FILE", help="the CloudEvent (JSON file, - for stdin)")
    p = _leaf(
        sub,
        "tail",
        "show the events a subscription matches, live",
        commands.tail,
        "Print each event the subscription matches from now on, until Ctrl-C, --count events, or "
        "the subscription is deleted. With --json, one JSON event per line.",
    )
    p.add_argument("subscription", metavar="SUBSCRIPTION", help="subscription id")
    p.add_argument("--count", type=_POSITIVE, metavar="N", help="stop after N events")
    p = _leaf(
        sub,
        "receive",
        "receive events of a PULL subscription under a lock",
        commands.receive,
        "Receive up to --max events of the PULL subscription SUBSCRIPTION, waiting up to --wait "
        "seconds for the first, and print them (with --json, one JSON object per line: lock token, "
        "delivery count, lock end, event). With --ack they are acknowledged once printed; without, "
        "their locks end by themselves and the events are received again.",
    )
    p.add_argument("subscription", metavar="SUBSCRIPTION", help="id of a PULL subscription")
    p.add_argument(
        "--max", type=_MAX_EVENTS, default=10, metavar="N", help="at most N events (1..1000, default 10)"
    )
    p.add_argument(
        "--wait", type=_WAIT, default=0, metavar="SECONDS", help="wait for the first (0..60, default 0)"
    )
    p.add_argument("--ack", action="store_true", help="acknowledge the events once printed")


def _add_subscriptions(sub: Sub) -> None:
    group = sub.add_parser("subscriptions", help="list, show, create and delete subscriptions")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = _leaf(actions, "list", "list subscriptions", commands.list_subscriptions)
    for name in ("protocol", "source", "type", "sink"):
        p.add_argument(f"--{name}", help=f"only subscriptions with this {name}")
    p.add_argument("--limit", type=_POSITIVE, metavar="N", help="at most N subscriptions (default: all)")
    p = _leaf(actions, "get", "show one subscription and its delivery status", commands.get_subscription)
    p.add_argument("id", metavar="ID")
    p = _leaf(
        actions,
        "create",
        "create a subscription",
        commands.create_subscription,
        "Create a subscription from a JSON body (FILE, or - for stdin) and/or the flags below, "
        "which set their fields on top of the body.",
    )
    p.add_argument("file", nargs="?", metavar="FILE", help="subscription body as JSON (- for stdin)")
    p.add_argument("--protocol", help="HTTP, MQTT3, MQTT5, AMQP, KAFKA or NATS")
    p.add_argument("--sink", help="where to deliver, e.g. https://hooks.example.com/in")
    p.add_argument("--source", help="only events with this source")
    p.add_argument("--type", dest="types", action="append", metavar="TYPE", help="accepted type (repeatable)")
    p.add_argument(
        "--filter",
        dest="filters",
        action="append",
        metavar="JSON",
        help='a filter expression, e.g. \'{"prefix": {"subject": "eu/"}}\' (repeatable)',
    )
    p.add_argument("--sql", action="append", metavar="EXPR", help="a CloudEvents SQL filter (repeatable)")
    p.add_argument("--setting", action="append", metavar="KEY=VALUE", help="a protocol setting (repeatable)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a config entry (repeatable)")
    p = _leaf(actions, "delete", "delete a subscription", commands.delete_subscription)
    p.add_argument("id", metavar="ID")
    p.add_argument("--if-match", metavar="ETAG", help="delete only if the subscription's ETag is this")


def _add_events(sub: Sub) -> None:
    group = sub.add_parser("events", help="publish events")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = _leaf(
        actions,
        "send",
        "publish CloudEvents",
        commands.send_events,
        "Publish the CloudEvent in FILE (JSON event format; - or nothing for stdin). A JSON array is "
        "sent as one batch. --mode binary sends attributes as ce- headers and the data as the body.",
    )
    p.add_argument("file", nargs="?", default="-", metavar="FILE", help="the event as JSON (default: stdin)")
    p.add_argument("--mode", choices=("structured", "binary"), default="structured", help="HTTP content mode")


def _add_deadletters(sub: Sub) -> None:
    group = sub.add_parser("deadletters", help="list and redrive a subscription's dead letters")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = _leaf(actions, "list", "list dead letters, oldest first", commands.list_dead_letters)
    p.add_argument("subscription", metavar="SUBSCRIPTION")
    p.add_argument("--limit", type=_POSITIVE, default=100, metavar="N", help="at most N (default: 100)")
    p = _leaf(actions, "redrive", "deliver dead letters again (all, or those given)", commands.redrive)
    p.add_argument("subscription", metavar="SUBSCRIPTION")
    p.add_argument(
        "--id", dest="ids", type=_ID, action="append", metavar="N", help="a dead letter id (repeatable)"
    )

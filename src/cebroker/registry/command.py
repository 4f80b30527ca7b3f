"""The ``cebroker registry`` command: ``registry sync --from URL [--to URL] [--follow]``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

import httpx

from cebroker.options import Duration, HttpUrl, Option, OptionParser, argument_type
from cebroker.registry.sync import Replicator, SyncError, follow

#: ``--to``: the broker written to; shares ``serve``'s variable for the broker's public URL.
TARGET = Option(
    name="target",
    kind=HttpUrl(),
    default="http://127.0.0.1:8080",
    help="base URL of this broker",
    flag="--to",
    variable="CEBROKER_BASE_URL",
)


def add_registry(sub: argparse._SubParsersAction[OptionParser]) -> None:
    """Register the ``registry`` command and its ``sync`` subcommand."""
    p = sub.add_parser(
        "registry", help="registry operations", description="Operations on a broker's registry."
    )
    actions = p.add_subparsers(dest="registry_command", required=True, metavar="ACTION")
    s = actions.add_parser(
        "sync",
        help="copy another xRegistry into this broker's registry",
        description=(
            "Pull replication: copy every group, resource, version and document of the registry at "
            "--from into the broker at --to; with --follow, keep copying its changes as they happen "
            "(needs a CloudEvents Subscriptions API at the source, e.g. another cebroker)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    s.add_argument(
        "--from", dest="source", required=True, metavar="URL", help="base URL of the source registry"
    )
    s.add_option(TARGET)
    s.add_argument("--follow", action="store_true", help="keep following the source's change events")
    s.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="where to receive change events (--follow)",
    )
    s.add_argument(
        "--sink-url", default=None, metavar="URL", help="URL the source delivers to, if not the listener"
    )
    s.add_argument(
        "--timeout",
        type=argument_type(Duration(positive=True)),
        default=30.0,
        metavar="DURATION",
        help="HTTP timeout (seconds, or with a unit: 500ms, 1m)",
    )


async def _sync(args: argparse.Namespace) -> int:
    async with httpx.AsyncClient(timeout=args.timeout) as client:
        replicator = Replicator(args.source, args.target, client)
        if not args.follow:
            report = await replicator.pull()
            print(f"copied {report.groups} groups and {report.resources} resources from {args.source}")
            return 0
        host, _, port = args.listen.rpartition(":")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        print(f"following {args.source}; stop with Ctrl-C", flush=True)
        await follow(replicator, host or "127.0.0.1", int(port or 0), stop, args.sink_url)
        return 0


def run_registry(args: argparse.Namespace) -> int:
    """Run a ``registry`` subcommand; prints the reason and returns 1 when the copy fails."""
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_sync(args))
    except SyncError as exc:
        print(f"registry sync failed: {exc}", file=sys.stderr)
        return 1

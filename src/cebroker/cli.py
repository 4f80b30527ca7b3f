"""The ``cebroker`` command line.

Every ``serve`` flag has a ``CEBROKER_*`` environment variable and a key of the configuration
file (``--config FILE``, TOML); a flag given on the command line wins over the variable, which
wins over the file, which wins over the default. All come from the declaration of
:class:`~cebroker.settings.Settings` (see :mod:`cebroker.options`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging.config
import math
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from cebroker import __version__
from cebroker.client.parser import add_client_commands
from cebroker.options import OptionParser, options_of
from cebroker.options.config_file import render_config
from cebroker.options.units import DURATION_HELP, SIZE_HELP
from cebroker.registry.command import add_registry, run_registry
from cebroker.settings import VARIABLE_PREFIX, Settings
from cebroker.spark.command import add_spark_feed, run_spark_feed

if TYPE_CHECKING:
    import uvicorn

    from cebroker.sealing.cipher import Sealer
    from cebroker.storage import Storage
    from cebroker.web.heads import HeadLimits

SERVE_OPTIONS = options_of(Settings, VARIABLE_PREFIX)
#: The variable naming the configuration file (``--config``).
CONFIG_VARIABLE = VARIABLE_PREFIX + "CONFIG"

_SERVE_EPILOG = (
    "A flag wins over its variable, which wins over the configuration file (--config; keys are the "
    "settings' names, e.g. max_event_size), which wins over the default; a bad value of any is a usage "
    f"error. Sizes: {SIZE_HELP}. Durations: {DURATION_HELP}. Switches: on/off, true/false, yes/no "
    "or 1/0."
)


def build_parser() -> OptionParser:
    """The full argument parser (also used to document the CLI)."""
    parser = OptionParser(
        prog="cebroker",
        description="cebroker: a CloudEvents subscription-manager broker.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser(
        "serve",
        help="run the broker",
        description="Run the broker: Subscriptions API, event ingress and delivery, registry.",
        epilog=_SERVE_EPILOG,
    )
    serve.add_config_file("--config", CONFIG_VARIABLE)
    serve.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective settings as a configuration file (secrets hidden) and exit",
    )
    serve.add_options(SERVE_OPTIONS)
    add_spark_feed(sub)
    add_registry(sub)
    add_client_commands(sub)
    _add_secrets(sub)
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Turn parsed ``serve`` arguments into :class:`Settings`."""
    return Settings(**{option.name: getattr(args, option.name) for option in SERVE_OPTIONS})


def raise_open_files_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit; returns the new soft limit.

    Every delivery in flight holds a connection, up to each subscription's concurrency, and
    the HTTP sender has no shared cap that sinks which hang could exhaust: the descriptors are
    the one resource left that every subscription shares, and a soft limit of 1,024 (a common
    default) would let a few hanging sinks starve the others of sockets.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return soft
        return hard
    return soft


def head_limits(settings: Settings) -> HeadLimits:
    """The limits on request heads that ``settings`` set (enforced by the HTTP protocol)."""
    from cebroker.web.heads import HeadLimits

    return HeadLimits(
        max_bytes=settings.max_header_size,
        max_count=settings.max_header_count,
        max_url=settings.max_url_length,
        timeout=settings.header_timeout,
    )


def stopping_server(config: uvicorn.Config, on_stop: Sequence[Callable[[], None]]) -> uvicorn.Server:
    """uvicorn's server, which calls each of ``on_stop`` when the process is told to stop.

    On SIGTERM (or SIGINT) uvicorn stops accepting connections, lets the open requests finish (up
    to its ``timeout_graceful_shutdown``), then runs the app's shutdown, in which the pipeline
    lets the deliveries under way finish and the storage frees what the instance still holds.
    The handlers run before all that: readiness turns 503 at once.
    """
    import uvicorn

    from cebroker.pipeline.gcpause import freeze_started

    class StoppingServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                freeze_started()  # what start-up built lives as long as the process

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            for handler in on_stop:
                handler()
            super().handle_exit(sig, frame)  # a second signal forces the exit, as uvicorn's does

    return StoppingServer(config)


def _serve(args: argparse.Namespace) -> int:
    from ceprotocols.errors import SettingsError

    from cebroker.api.ops import OpsComponent, QuietInvalidHttp
    from cebroker.app import build_components, create_app, secrets_sealer, storage_from_settings
    from cebroker.errors import ConfigurationError
    from cebroker.logs import logging_config
    from cebroker.pipeline.component import PipelineComponent
    from cebroker.sealing.cipher import SealingError
    from cebroker.sources.component import source_names
    from cebroker.storage import StorageError
    from cebroker.web.heads import LimitedConfig, protocol_class

    settings = settings_from_args(args)
    if args.print_config:
        values = {option.name: getattr(settings, option.name) for option in SERVE_OPTIONS}
        print(render_config(SERVE_OPTIONS, values, args.origins), end="")
        return 0
    try:
        source_names(settings.sources)  # each valid on its own; the names must differ too
    except SettingsError as exc:
        build_parser().error(f"argument --source: {exc.reason}")
    problems = settings.serving_problems()
    if problems:
        for problem in problems:
            print(f"cebroker serve: {problem}", file=sys.stderr)
        return 2
    chosen = {}
    for flag, value, fast, fallback in (
        ("--loop", settings.loop, "uvloop", "asyncio"),
        ("--http", settings.http, "httptools", "h11"),
    ):
        installed = importlib.util.find_spec(fast) is not None
        if value == fast and not installed:
            print(
                f"cebroker serve: error: {flag} {fast}: {fast} is not installed "
                "(it comes with uvicorn[standard]; or use auto)",
                file=sys.stderr,
            )
            return 2
        chosen[flag] = (fast if installed else fallback) if value == "auto" else value
    config = logging_config(settings.log_level, settings.log_format)
    logging.config.dictConfig(config)
    logging.getLogger("cebroker").info(
        "serving on %s with event loop %s and HTTP parser %s (open files: up to %d)",
        settings.public_url,
        chosen["--loop"],
        chosen["--http"],
        raise_open_files_limit(),
    )
    if settings.authenticated and not settings.loopback_only and settings.tls_cert is None:
        logging.getLogger("cebroker").warning(
            "credentials travel in clear to %s: serve HTTPS (--tls-cert, --tls-key) or behind a TLS proxy",
            settings.host,
        )
    storage = storage_from_settings(settings)
    try:
        # Files the settings name (API keys, tenant policies, the secrets key) are read here,
        # before anything opens: one that cannot be used is refused with its reason.
        sealer = secrets_sealer(settings)
        components = build_components(settings, storage, sealer=sealer)
    except ConfigurationError as exc:
        print(f"cebroker serve: {exc}", file=sys.stderr)
        return 2
    try:
        # Before the server starts: a database held by another broker, written by a newer
        # release or unreadable is refused at once, with its reason and no traceback.
        # Every stored secret must open with this key file: a wrong one stops here, not later
        # in a delivery. The check opens a storage of its own on a loop of its own, so that
        # nothing of it is bound to the server's loop.
        clear, userinfo = asyncio.run(_check_secrets(storage_from_settings(settings), sealer))
        storage.prepare()
    except StorageError as exc:
        print(f"cebroker serve: {exc}", file=sys.stderr)
        return 1
    except SealingError as exc:
        print(f"cebroker serve: the stored secrets do not open: {exc}", file=sys.stderr)
        return 2
    if clear:
        logging.getLogger("cebroker").warning(
            "%d secrets are stored in clear by an earlier release: run cebroker secrets rotate", clear
        )
    for subscription, pointers in userinfo:
        # Stored by a release that accepted them; shown as *** everywhere, used as they are.
        logging.getLogger("cebroker").warning(
            "subscription %s was stored by an earlier release with user information in %s: it is"
            " shown as *** but kept in clear in the database; replace the subscription with the"
            " credentials in sinkcredential",
            subscription,
            ", ".join(pointers),
        )
    app = create_app(settings, components)
    logging.getLogger("uvicorn.error").addFilter(QuietInvalidHttp(app.state.incomplete))
    # The protocol is uvicorn's, with the limits on request heads (before any route runs).
    server = stopping_server(
        LimitedConfig(
            app,
            head_limits=head_limits(settings),
            # Single events are served by the protocol itself where they can be (cebroker.web.direct).
            direct=app.state.direct,
            host=settings.host,
            port=settings.port,
            log_config=config,
            log_level=settings.log_level,
            access_log=settings.access_log,
            loop=chosen["--loop"],
            http=protocol_class("h11" if chosen["--http"] == "h11" else "httptools"),
            lifespan="on",
            ssl_certfile=settings.tls_cert,
            ssl_keyfile=settings.tls_key,
            # Requests still open when told to stop get the grace too (a live tail never ends).
            timeout_graceful_shutdown=max(1, math.ceil(settings.shutdown_grace)),
        ),
        # Readiness turns 503 and no further delivery starts; one grace covers the requests and
        # the deliveries in flight.
        on_stop=[part.stop_soon for part in components if isinstance(part, OpsComponent | PipelineComponent)],
    )
    server.run()
    # As uvicorn.run: a server that never started (its port taken, say) is a start-up failure.
    return 0 if server.started else 3


async def _check_secrets(storage: Storage, sealer: Sealer) -> tuple[int, list[tuple[str, list[str]]]]:
    """Open every stored secret once (``storage`` is opened and closed again); return how many
    are still in clear, and the subscriptions whose URLs carry user information (with the
    pointers of those URLs)."""
    from cebroker.sealing.store import verify_sealed
    from cebroker.subscription import urls_with_userinfo

    await storage.open()
    try:
        clear = await verify_sealed(storage.subscriptions, sealer)
        userinfo = [
            (subscription.id, pointers)
            for subscription in await storage.subscriptions.all()
            if (pointers := list(urls_with_userinfo(subscription)))
        ]
        return clear, userinfo
    finally:
        await storage.close()


def _add_secrets(sub: argparse._SubParsersAction[OptionParser]) -> None:
    secrets = sub.add_parser("secrets", help="manage the key of stored secrets")
    commands = secrets.add_subparsers(dest="secrets_command", required=True, metavar="COMMAND")
    rotate = commands.add_parser(
        "rotate",
        help="seal every stored secret again under a new key (broker stopped)",
        description=(
            "Generate a new key and seal every stored secret with it; the key file then holds the"
            " new key only (or, with --new-key-file, the new key goes to that new file)."
        ),
    )
    rotate.add_options([option for option in SERVE_OPTIONS if option.name in ("db", "secrets_key")])
    rotate.add_argument(
        "--new-key-file", type=Path, metavar="FILE", help="write the new key to this new file"
    )
    init = commands.add_parser(
        "init",
        help="create a secrets key file, unless it exists (for --secrets-key-file)",
        description=(
            "Write a new random key to FILE (mode 0600). A file that exists already is left as it"
            " is: its key may seal stored secrets. Every instance on one PostgreSQL database needs"
            " the same file."
        ),
    )
    init.add_argument("file", type=Path, metavar="FILE", help="the key file to create")


def _secrets(args: argparse.Namespace) -> int:
    from cebroker.errors import ConfigurationError
    from cebroker.sealing.cipher import SealingError
    from cebroker.sealing.rotate import rotate_secrets
    from cebroker.storage import StorageError

    if args.secrets_command == "init":
        return _secrets_init(args.file)
    try:
        print(rotate_secrets(args.db, args.secrets_key, args.new_key_file))
    except (ConfigurationError, SealingError, StorageError, FileExistsError) as exc:
        print(f"cebroker secrets rotate: {exc}", file=sys.stderr)
        return 1
    return 0


def _secrets_init(path: Path) -> int:
    from cebroker.sealing.keys import new_key, write_key_file

    try:
        write_key_file(path, (new_key(),), exclusive=True)
    except FileExistsError:
        print(f"{path} exists already: left as it is")
        return 0
    except OSError as exc:
        print(f"cebroker secrets init: cannot write {path}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"created {path} (mode 0600): give it to every instance as --secrets-key-file, and back it up")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cebroker`` command."""
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "spark-feed":
        return run_spark_feed(args)
    if args.command == "registry":
        return run_registry(args)
    if hasattr(args, "handler"):  # a management command (subscriptions, events, ...)
        from cebroker.client.commands import run

        return run(args)
    if args.command == "secrets":
        return _secrets(args)
    return 2  # argparse rejects unknown commands before this


if __name__ == "__main__":
    sys.exit(main())

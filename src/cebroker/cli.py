"""The ``cebroker`` command line.

Every ``serve`` flag has a ``CEBROKER_*`` environment variable; a flag given on the command line
wins over the variable, which wins over the default.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from cebroker.registry.command import add_registry, run_registry
from cebroker.settings import Settings
from cebroker.spark.command import add_spark_feed, run_spark_feed

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def _env(name: str, default: str) -> str:
    return os.environ.get(f"CEBROKER_{name}", default)


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0-65535)")
    return int(text)


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def _log_level(text: str) -> str:
    if text.lower() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return text.lower()


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    defaults = Settings()
    p = sub.add_parser(
        "serve",
        help="run the broker",
        description="Run the broker: Subscriptions API, event ingress and delivery, registry.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--host", default=_env("HOST", defaults.host), help="address to bind [CEBROKER_HOST]")
    # String defaults go through ``type`` too, so a bad CEBROKER_* value is reported like a bad flag.
    p.add_argument(
        "--port", type=_port, default=_env("PORT", str(defaults.port)), help="TCP port [CEBROKER_PORT]"
    )
    p.add_argument(
        "--db",
        type=Path,
        default=_env("DB", str(defaults.db)),
        help="SQLite database file, created on first start [CEBROKER_DB]",
    )
    p.add_argument(
        "--log-level",
        type=_log_level,
        default=_env("LOG_LEVEL", defaults.log_level),
        help=f"log level: {', '.join(LOG_LEVELS)} [CEBROKER_LOG_LEVEL]",
    )
    p.add_argument(
        "--base-url",
        default=_env("BASE_URL", "") or None,
        help="public base URL of this broker, if not http://HOST:PORT [CEBROKER_BASE_URL]",
    )
    p.add_argument(
        "--max-subscription-body",
        type=_positive_int,
        default=_env("MAX_SUBSCRIPTION_BODY", str(defaults.max_subscription_body)),
        help="largest subscription request body in bytes [CEBROKER_MAX_SUBSCRIPTION_BODY]",
    )
    _add_pipeline(p, defaults)


def _add_pipeline(p: argparse.ArgumentParser, defaults: Settings) -> None:
    p.add_argument(
        "--max-event-size",
        type=int,
        default=int(_env("MAX_EVENT_SIZE", str(defaults.max_event_size))),
        help="largest event in bytes; larger gets 413 [CEBROKER_MAX_EVENT_SIZE]",
    )
    p.add_argument(
        "--max-batch-size",
        type=int,
        default=int(_env("MAX_BATCH_SIZE", str(defaults.max_batch_size))),
        help="largest batch request body in bytes [CEBROKER_MAX_BATCH_SIZE]",
    )
    p.add_argument(
        "--dedup-window",
        type=float,
        default=float(_env("DEDUP_WINDOW", str(defaults.dedup_window))),
        help="seconds within which a repeated (source, id) is not delivered again [CEBROKER_DEDUP_WINDOW]",
    )
    p.add_argument(
        "--max-backlog",
        type=int,
        default=int(_env("MAX_BACKLOG", str(defaults.max_backlog))),
        help="pending deliveries above which ingress answers 503 [CEBROKER_MAX_BACKLOG]",
    )
    p.add_argument(
        "--webhook-validation",
        choices=("on", "off"),
        default=_env("WEBHOOK_VALIDATION", "on" if defaults.webhook_validation else "off"),
        help="CloudEvents webhook validation handshake before HTTP delivery [CEBROKER_WEBHOOK_VALIDATION]",
    )
    p.add_argument(
        "--event-validation",
        choices=("off", "warn", "enforce"),
        default=_env("EVENT_VALIDATION", defaults.event_validation),
        help="check incoming events against registry definitions [CEBROKER_EVENT_VALIDATION]",
    )
    p.add_argument(
        "--registry-document-schema",
        type=Path,
        default=_env("REGISTRY_DOCUMENT_SCHEMA", "") or None,
        help="JSON Schema applied to registry imports [CEBROKER_REGISTRY_DOCUMENT_SCHEMA]",
    )
    p.add_argument(
        "--source",
        dest="sources",
        action="append",
        metavar="URL",
        help="consume CloudEvents from this URL, repeatable: mqtt://host:1883/topic/#, "
        "kafka://host:9092/topic?group=g, nats://host:4222/subject, amqp://host:5672/queue/name "
        "[CEBROKER_SOURCES, space-separated]",
    )


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also used to document the CLI)."""
    parser = argparse.ArgumentParser(
        prog="cebroker",
        description="cebroker: a CloudEvents subscription-manager broker.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_serve(sub)
    add_spark_feed(sub)
    add_registry(sub)
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Turn parsed ``serve`` arguments into :class:`Settings`."""
    return Settings(
        host=args.host,
        port=args.port,
        db=args.db,
        log_level=args.log_level,
        base_url=args.base_url,
        max_subscription_body=args.max_subscription_body,
        max_event_size=args.max_event_size,
        max_batch_size=args.max_batch_size,
        dedup_window=args.dedup_window,
        max_backlog=args.max_backlog,
        webhook_validation=args.webhook_validation == "on",
        event_validation=args.event_validation,
        registry_document_schema=args.registry_document_schema,
        sources=tuple(args.sources if args.sources is not None else _env("SOURCES", "").split()),
    )


def _check_sources(sources: Sequence[str]) -> None:
    """Reject a --source that cannot be consumed as a usage error (exit 2), before starting."""
    from ceprotocols.errors import SettingsError
    from ceprotocols.sources import create_receiver

    for url in sources:
        try:
            create_receiver(url)  # builds the receiver only: no connection yet
        except (SettingsError, ImportError) as exc:
            build_parser().error(f"argument --source: {exc}")


def _serve(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from cebroker.app import create_app

    settings = settings_from_args(args)
    _check_sources(settings.sources)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    app = create_app(settings)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=settings.log_level == "debug",
        lifespan="on",
    )
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
    return 2  # argparse rejects unknown commands before this


if __name__ == "__main__":
    sys.exit(main())

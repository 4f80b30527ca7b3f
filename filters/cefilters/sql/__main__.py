"""Evaluate a CESQL expression against an event from the command line.

    python -m cefilters.sql "type LIKE 'com.example.%'" '{"type": "com.example.order"}'
    echo '{"type": "x"}' | python -m cefilters.sql "type = 'x'"

Prints the value and any error as JSON; the exit status is 0 when the event would pass the
expression as a filter, 1 when not, and 2 when the expression or the event is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys

from cefilters import sql


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m cefilters.sql", description="Evaluate a CESQL expression against an event."
    )
    parser.add_argument("expression", help="the CESQL expression")
    parser.add_argument("event", nargs="?", help="the event as JSON (default: read from stdin)")
    args = parser.parse_args(argv)
    try:
        expression = sql.compile(args.expression)
    except sql.ParseError as error:
        print(error, file=sys.stderr)
        return 2
    try:
        event = json.loads(args.event if args.event is not None else sys.stdin.read())
    except json.JSONDecodeError as error:
        print(f"the event is not valid JSON: {error}", file=sys.stderr)
        return 2
    if not isinstance(event, dict):
        print("the event must be a JSON object of attributes", file=sys.stderr)
        return 2
    result = expression.evaluate(event)
    errors = [{"kind": error.kind, "message": error.message} for error in result.errors]
    print(json.dumps({"value": result.value, "errors": errors}))
    return 0 if result.value is True and not result.errors else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""``python -m cefilters.sql``: evaluate an expression against a JSON event from a shell."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cefilters.sql", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_matching_event_exits_0() -> None:
    """The value and errors print as JSON; status 0 means the event passes as a filter."""
    done = run("type LIKE 'com.example.%' AND priority > 5", '{"type": "com.example.a", "priority": 7}')
    assert done.returncode == 0
    assert json.loads(done.stdout) == {"value": True, "errors": []}


def test_an_error_is_printed_and_exits_1() -> None:
    """An evaluation error is part of the answer (CESQL v1 §4), read from stdin here."""
    done = run("1 / missing", stdin='{"type": "x"}')
    assert done.returncode == 1
    assert json.loads(done.stdout)["errors"][0]["kind"] == "missingAttribute"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("type LIKE 42", "{}"), "at position 10"),
        (("TRUE", "{not json"), "not valid JSON"),
        (("TRUE", "[1, 2]"), "must be a JSON object"),
    ],
)
def test_invalid_input_exits_2_with_a_message(args: tuple[str, str], message: str) -> None:
    """A parse error (with its caret) or an unusable event is reported, never a traceback."""
    done = run(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr

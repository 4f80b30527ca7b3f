"""The examples in filters/README.md run and print what the document says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import cefilters

README = Path(__file__).resolve().parents[2] / "filters" / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_quick_start_runs_as_documented() -> None:
    """The quick start compiles, matches, reports an error path and uses the index as shown."""
    quick_start = _python_blocks()[0]
    namespace: dict[str, object] = {}
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(quick_start, str(README), "exec"), namespace)
    # The error line the document shows in a comment is what the code prints.
    shown = re.search(r"# (/0/all/1/sql - .*)", quick_start)
    assert shown is not None
    assert output.getvalue().strip() == shown.group(1)
    compiled, index = namespace["f"], namespace["index"]
    assert isinstance(compiled, cefilters.Filter)
    assert compiled.matches({"type": "com.example.order.paid", "source": "/shop/us", "priority": 7})
    assert isinstance(index, cefilters.SubscriptionIndex)
    assert index.match({"type": "com.example.order.paid", "source": "/shop/eu"}) == {"orders", "paid"}


def test_explain_example_prints_what_it_shows() -> None:
    """The "Explain a match" example prints exactly the lines shown in its comments."""
    (example,) = [block for block in _python_blocks() if "index.explain(" in block]
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(example, str(README), "exec"), {})
    shown = [line.removeprefix("# ") for line in example.splitlines() if line.startswith("# ")]
    assert output.getvalue().splitlines() == shown

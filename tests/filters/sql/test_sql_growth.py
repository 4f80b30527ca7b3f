"""CESQL string growth is bounded: statically when compiled, and by every string function at run
time (finding 3 of the hardening issue: eight levels of CONCAT_WS took the broker to 4.4 GB)."""

from __future__ import annotations

import time

import pytest
from cefilters import sql
from cefilters.sql.growth import MAX_COPIES, MAX_STRING_LENGTH


def _concat_ws(levels: int) -> str:
    text = "subject"
    for _ in range(levels):
        text = f"CONCAT_WS({text},subject,subject,subject,subject,subject)"
    return f"LENGTH({text}) > 0"


def test_growth_over_the_static_budget_is_a_parse_error_at_the_call() -> None:
    with pytest.raises(sql.ParseError) as caught:
        sql.compile(_concat_ws(8))
    assert caught.value.position == 7  # the outermost CONCAT_WS
    assert caught.value.reason.startswith("over budget: CONCAT_WS could build a string of 174761 copies")
    assert f"the budget is {MAX_COPIES} copies" in caught.value.reason


@pytest.mark.parametrize(
    "text",
    [
        "LOWER(LOWER(LOWER(LOWER(LOWER(LOWER(subject)))))) = ''",  # 3**6 = 729 copies
        "CONCAT(" + ", ".join(["subject"] * 300) + ") = ''",
    ],
)
def test_other_growing_calls_are_estimated(text: str) -> None:
    with pytest.raises(sql.ParseError, match="over budget"):
        sql.compile(text)


def test_growth_within_the_static_budget_is_stopped_at_run_time() -> None:
    """Three levels (169 copies) compile; with a long attribute the function refuses
    to build more than 1 MiB, quickly, and the expression fails (no match)."""
    expression = sql.compile(_concat_ws(3))
    assert expression.matches({"subject": "x"}) is True
    started = time.perf_counter()
    result = expression.evaluate({"subject": "y" * 20_000})
    assert time.perf_counter() - started < 0.5
    (error,) = result.errors
    assert error.kind == "functionEvaluation"
    assert error.message.startswith("over budget: CONCAT_WS would build a string of")
    assert f"(the budget is {MAX_STRING_LENGTH})" in error.message
    assert expression.matches({"subject": "y" * 20_000}) is False


@pytest.mark.parametrize("function", ["LOWER", "UPPER"])
def test_case_mapping_is_bounded_too(function: str) -> None:
    result = sql.compile(f"LENGTH({function}(subject)) > 0").evaluate({"subject": "ß" * 400_000})
    assert result.errors
    assert result.errors[0].message.startswith(f"over budget: {function}")

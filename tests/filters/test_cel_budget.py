"""cefilters.cel: the bounded CEL evaluator's public API, its semantics and its budget."""

from __future__ import annotations

import contextlib
import time

import cefilters
import pytest
from cefilters.cel import (
    Budget,
    BudgetExceeded,
    CelCostError,
    CelEvaluationError,
    CelSyntaxError,
    compile_cel,
)
from hypothesis import given, settings
from hypothesis import strategies as st


def _nested_maps(levels: int) -> str:
    members = "[1,2,3,4,5,6,7,8,9,10]"
    text = members
    for level in range(levels):
        text = f"{members}.map(x{level}, {text})"
    return f"size({text}) > 0"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('type.startsWith("com.example") && size(subject) > 3', True),
        ("[1, 2, 3].map(x, x * 2)", [2, 4, 6]),
        ("[1, 2, 3].filter(x, x > 1)", [2, 3]),
        ("[1, 2, 3].map(x, x > 1, x * 10)", [20, 30]),
        ("[1, 2, 3].exists_one(x, x == 2)", True),
        ('{"a": 1, "b": 2}.all(k, k in ["a", "b"])', True),
        ("data.items.map(i, i.price * i.count)", [6, 5]),
        ('{"total": data.items.map(i, i.count).size(), "id": data.id}', {"total": 2, "id": "o-1"}),
        ("has(data.id) && !has(data.nope)", True),
        ("1u + 2u", 3),
        ("7 / -2", -3),
        ("-7 % 3", -1),
        ("1 == 1.0 && 1u == 1", True),
        ('timestamp("2026-01-02T03:04:05Z").getFullYear()', 2026),
        ('timestamp("2026-01-02T03:04:05Z") + duration("1h")', "2026-01-02T04:04:05Z"),
        ('string(1.5) + "/" + string(true)', "1.5/true"),
        ('type(1) == int && type("a") == string', True),
        ('b"ab" + b"c"', b"abc"),
        ('"abc".matches("^a.c$")', True),
        ("1 / 0 == 1 || true", True),  # an error is absorbed by a true operand
        ("false && 1 / 0 == 1", False),
        ("true ? 1 : 1 / 0", 1),
    ],
)
def test_evaluation_returns_plain_values(text: str, expected: object) -> None:
    """Values come back as plain Python/JSON values (uint as int, a timestamp as RFC 3339)."""
    variables = {
        "type": "com.example.x",
        "subject": "abcd",
        "data": {"id": "o-1", "items": [{"price": 2, "count": 3}, {"price": 5, "count": 1}]},
    }
    assert compile_cel(text).evaluate(variables) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("missing == 1", "undeclared reference to 'missing'"),
        ("1 / 0", "divide by zero"),
        ("9223372036854775807 + 1", "int overflow"),
        ('1 + "a"', "no such overload: int + string"),
        ('{"a": 1}.b', "no such key: 'b'"),
        ("[1][3]", "index out of range: 3"),
        ("nosuch(1)", "no such function: nosuch"),
    ],
)
def test_runtime_errors_name_the_reason_and_position(text: str, reason: str) -> None:
    """A run-time error is a CelEvaluationError with a reason and, when known, a position."""
    with pytest.raises(CelEvaluationError) as caught:
        compile_cel(text).evaluate({})
    assert caught.value.reason == reason
    assert not isinstance(caught.value, BudgetExceeded)
    assert caught.value.position is not None
    assert caught.value.position[0] == 1


def test_syntax_errors_are_filter_errors_with_a_position() -> None:
    with pytest.raises(CelSyntaxError) as caught:
        compile_cel("a && (b ||")
    assert isinstance(caught.value, cefilters.FilterError)
    assert caught.value.position == (1, 9)
    assert "syntax error at line 1, column 9" in caught.value.message


def test_nested_macros_are_refused_statically() -> None:
    """Finding 1 and 2: four or five nested maps over ten members are refused when compiled,
    with the estimate, the budget and where; three levels are within the budget and fast."""
    for levels in (4, 5):
        with pytest.raises(CelCostError) as caught:
            compile_cel(_nested_maps(levels))
        assert "is over the budget of 10000" in caught.value.message
        assert caught.value.position is not None
    program = compile_cel(_nested_maps(3))
    started = time.perf_counter()
    assert program.evaluate({}) is True
    assert time.perf_counter() - started < 0.5
    assert program.cost <= 10_000


def test_the_filter_dialect_refuses_an_over_budget_expression_at_its_pointer() -> None:
    with pytest.raises(CelCostError) as caught:
        cefilters.compile([{"all": [{"cel": _nested_maps(5)}]}])
    assert caught.value.path == "/0/all/0/cel"
    assert "estimated cost" in caught.value.message


def test_steps_over_dynamic_lists_are_bounded_at_run_time() -> None:
    """A range whose size the text does not tell is estimated at ten members; at run time the
    step count stops it, whatever the list holds, in milliseconds."""
    program = compile_cel("l.map(a, l.map(b, l.map(c, a + b + c)))")
    started = time.perf_counter()
    with pytest.raises(BudgetExceeded) as caught:
        program.evaluate({"l": list(range(1000))})
    assert time.perf_counter() - started < 1.0
    assert "10000 steps" in caught.value.reason
    small = compile_cel("l.map(a, l.map(b, a + b))", budget=Budget(max_steps=100_000))
    result = small.evaluate({"l": list(range(100))})
    assert isinstance(result, list)
    assert len(result) == 100


def test_output_growth_is_bounded_at_run_time() -> None:
    """Concatenation stops at the output budget instead of building gigabytes."""
    program = compile_cel(" + ".join(["s"] * 64), budget=Budget(max_output_bytes=1 << 16))
    with pytest.raises(BudgetExceeded) as caught:
        program.evaluate({"s": "x" * 10_000})
    assert "bytes built" in caught.value.reason
    assert program.evaluate({"s": "x"}) == "x" * 64


def test_depth_is_bounded_statically() -> None:
    with pytest.raises(CelCostError) as caught:
        compile_cel("!" * 100 + "true")
    assert "nested more than 64 levels" in caught.value.message
    assert compile_cel(" || ".join(f"x == {i}" for i in range(200))).evaluate({"x": 150}) is True


def test_budget_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_steps"):
        Budget(max_steps=0)


def test_matches_uses_linear_time_regular_expressions() -> None:
    """``matches`` runs RE2 (CEL's specified syntax), which does not backtrack: a pattern that
    takes exponential time in a backtracking engine answers at once on a long hostile text."""
    program = compile_cel('subject.matches("^(a+)+$")')
    started = time.perf_counter()
    assert program.evaluate({"subject": "a" * 100_000 + "b"}) is False
    assert time.perf_counter() - started < 0.5
    with pytest.raises(CelSyntaxError, match="invalid regular expression"):
        compile_cel('subject.matches("(")')


class _Counter:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def over_budget(self, dialect: str, reason: str) -> None:
        self.seen.append((dialect, reason))


def test_an_over_budget_evaluation_is_no_match_and_is_told_to_the_observer() -> None:
    """The filter answers "no match" and the observer hears why; other failures are not counted."""
    counter = _Counter()
    growth = "size(" + " + ".join(["subject"] * 40) + ") > 0"
    index: cefilters.SubscriptionIndex[str] = cefilters.SubscriptionIndex(observer=counter)
    index.add("cel", [{"cel": growth}])
    index.add("sql", [{"sql": "LENGTH(CONCAT(subject, subject, subject)) > 0"}])
    index.add("plain", [{"cel": "missing == 1"}])
    assert index.match({"type": "t", "subject": "x"}) == {"cel", "sql"}
    assert counter.seen == []
    assert index.match({"type": "t", "subject": "x" * 400_000}) == set()
    assert sorted(dialect for dialect, _ in counter.seen) == ["cel", "sql"]
    assert all("over the budget" in reason or "over budget" in reason for _, reason in counter.seen)
    checks = index.explain("cel", {"type": "t", "subject": "x" * 400_000}).checks
    assert any(check.detail.startswith("cel: over budget: ") for check in checks)


@pytest.mark.parametrize(
    "body",
    [
        'subject.contains("zz")',
        'subject.matches("zz$")',
        'subject.startsWith("zz")',
        "-1 in l",
        '"zz".matches(r)',
    ],
)
def test_reading_long_values_in_a_macro_counts_steps(body: str) -> None:
    """Searching a 1 MB attribute (or a 200,000-member list, or compiling a 4,000-character
    pattern) in every iteration of nested macros is counted by what it reads, so the evaluation
    stops at the budget within milliseconds."""
    members = "[1,2,3,4,5,6,7,8,9,10]"
    program = compile_cel(f"{members}.exists(a, {members}.exists(b, {members}.exists(c, {body})))")
    started = time.perf_counter()
    with pytest.raises(BudgetExceeded, match="10000 steps"):
        program.evaluate({"subject": "a" * 1_000_000, "l": list(range(200_000)), "r": "(x|y)" * 800})
    assert time.perf_counter() - started < 1.0
    assert program.evaluate({"subject": "zz", "l": [-1], "r": "z"}) is True


_LEAVES = ["subject", "l", "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", "size(subject)", "x"]


@st.composite
def _expressions(draw: st.DrawFn, depth: int = 0) -> str:
    """Random compositions of macros, concatenations and searches over the variables."""
    if depth >= 5 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(_LEAVES))
    inner = draw(_expressions(depth + 1))
    other = draw(_expressions(depth + 1))
    shape = draw(st.integers(0, 6))
    if shape == 0:
        return f"l.map(x, {inner})"
    if shape == 1:
        return f"[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].exists(x, {inner} == {other})"
    if shape == 2:
        return f"({inner} + {other})"
    if shape == 3:
        return f"l.filter(x, string({inner}).contains(subject))"
    if shape == 4:
        return f"[{inner}, {other}, {inner}]"
    if shape == 5:
        return f"string({inner}).matches(subject)"
    return f"size({inner})"


@settings(max_examples=60, deadline=None)
@given(_expressions())
def test_no_expression_runs_past_its_budget(text: str) -> None:
    """Whatever the composition: refused at compile time, or evaluated (a value, an error, or
    over budget) in bounded time."""
    try:
        program = compile_cel(text)
    except CelSyntaxError:
        return
    started = time.perf_counter()
    with contextlib.suppress(CelEvaluationError):  # an error or over budget: both are answers
        program.evaluate({"subject": "ab" * 50_000, "l": list(range(300))})
    assert time.perf_counter() - started < 2.0, text

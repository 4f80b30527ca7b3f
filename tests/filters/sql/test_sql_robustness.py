"""Hostile and random input: compiling raises nothing but ParseError, evaluating raises nothing,
and the deepest accepted expression evaluates within a small, fixed stack budget."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType

import pytest
from cefilters import sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TOKENS = [
    "type", "source", "x", "missing", "n", "b", "1", "0", "-1", "2147483647", "'a%'", "'_b'", '"c"',
    "'10'", "TRUE", "false", "NOT", "AND", "OR", "XOR", "LIKE", "IN", "EXISTS", "=", "!=", "<>", "<",
    "<=", ">", ">=", "+", "-", "*", "/", "%", "(", ")", ",", "ABS", "LENGTH", "CONCAT", "SUBSTRING",
    "INT", "BOOL", "STRING", "LEFT", "NOPE",
]  # fmt: skip

VALUES = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(2**33), max_value=2**33),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=2),
)
EVENTS = st.dictionaries(st.sampled_from(["type", "source", "x", "n", "b", "subject"]), VALUES, max_size=6)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tokens=st.lists(st.sampled_from(TOKENS), min_size=1, max_size=14), event=EVENTS)
def test_random_token_sequences(tokens: list[str], event: dict[str, object]) -> None:
    """Property: any text either compiles or raises ParseError (with a position inside it); a
    compiled expression evaluates to a CESQL value without raising, and matches agrees."""
    text = " ".join(tokens)
    try:
        compiled = sql.compile(text)
    except sql.ParseError as error:
        position = error.position
        compiled = None
    if compiled is None:
        assert 0 <= position <= len(text)
        return
    result = compiled.evaluate(event)
    assert type(result.value) in (bool, int, str)
    assert len(result.errors) <= 1
    assert all(error.kind in sql.ERROR_KINDS for error in result.errors)
    assert compiled.matches(event) is (result.value is True and not result.errors)


EXPRESSIONS = [
    "type = 'com.example' AND source LIKE '/shop/%'",
    "x + n > 3 OR b",
    "INT(x) * n / (n - n) = 0",
    "x IN (1, 'a', TRUE, n)",
    "CONCAT(x, n, b) LIKE '%1_'",
    "SUBSTRING(x, n, n) = LEFT(x, n)",
    "NOT b XOR EXISTS x",
    "-n < ABS(x)",
]


@settings(max_examples=300, deadline=None)
@given(event=EVENTS)
def test_random_events_never_make_evaluation_raise(event: dict[str, object]) -> None:
    """Property: whatever values the event holds, evaluate answers and matches agrees."""
    for text in EXPRESSIONS:
        compiled = sql.compile(text)
        result = compiled.evaluate(event)
        assert type(result.value) in (bool, int, str)
        assert compiled.matches(event) is (result.value is True and not result.errors)


def _stack_depth() -> int:
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


# Built on attributes (t, one, a), so nothing is folded away at compile time.
DEEP_EVENT = {"t": "true", "one": "1", "a": "a"}
BUILDERS: dict[str, Callable[[int], str]] = {
    "parentheses": lambda n: "(one + " * n + "one" + ")" * n,
    "not": lambda n: "NOT " * n + "t",
    "minus": lambda n: "- " * n + "one",
    "calls": lambda n: "ABS(" * n + "one" + ")" * n,
    "like-run": lambda n: "a" + " LIKE 'a'" * n,
    "in-nesting": lambda n: "one IN (" * n + "1" + ")" * n,
    "mixed": lambda n: "(NOT (one < -(one + ABS(" * (n // 6) + "one" + "))))" * (n // 6),
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_the_deepest_accepted_expression_fits_a_small_stack(name: str) -> None:
    """Hostile input: the nesting bound also bounds evaluation's stack use (about two frames per
    level), so evaluating never hits RecursionError even when called with little stack left."""
    build = BUILDERS[name]
    deepest = None
    for n in range(sql.MAX_DEPTH, 0, -1):
        try:
            deepest = sql.compile(build(n))
            break
        except sql.ParseError:
            continue
    assert deepest is not None
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + 3 * sql.MAX_DEPTH + 20)
    try:
        result = deepest.evaluate(DEEP_EVENT)
    finally:
        sys.setrecursionlimit(limit)
    assert result.errors == [], result.errors


FUSED_PAIRS = [
    # (fused: attribute OP constant, the same condition through an explicit cast, not fused)
    ("x = 'abc'", "STRING(x) = 'abc'"),
    ("x <> '10'", "STRING(x) <> '10'"),
    ("x = 10", "INT(x) = 10"),
    ("x != -3", "INT(x) != -3"),
    ("x = TRUE", "BOOL(x) = TRUE"),
    ("x < 5", "INT(x) < 5"),
    ("x >= '5'", "INT(x) >= 5"),
    ("x > 2147483647", "INT(x) > 2147483647"),
    ("x LIKE 'a%'", "STRING(x) LIKE 'a%'"),
    ("x NOT LIKE '%1'", "STRING(x) NOT LIKE '%1'"),
    ("x LIKE 'true'", "STRING(x) LIKE 'true'"),
    ("x LIKE '_b%'", "STRING(x) LIKE '_b%'"),
]
FUSED_VALUES = st.one_of(
    st.sampled_from(["abc", "10", "5", "-3", "0005", "true", "TRUE", "a1", "", " 5", "ab", "1"]),
    st.integers(min_value=-10, max_value=12),
    st.integers(min_value=2**31 - 2, max_value=2**31 + 2),
    st.booleans(),
    st.none(),
    VALUES,
)


@settings(max_examples=300, deadline=None)
@given(value=FUSED_VALUES)
def test_fused_attribute_tests_agree_with_the_general_path(value: object) -> None:
    """Property: the fused read-and-test closures for ``attribute OP constant`` give exactly what
    the general operator closures give (value and error kind) for any attribute value."""
    event: dict[str, object] = {"x": value}
    for fused, general in FUSED_PAIRS:
        expected = sql.compile(general).evaluate(event)
        actual = sql.compile(fused).evaluate(event)
        assert (actual.value, [e.kind for e in actual.errors]) == (
            expected.value,
            [e.kind for e in expected.errors],
        ), (fused, value)
    missing = sql.compile("x = 'abc'").evaluate({})
    assert [e.kind for e in missing.errors] == ["missingAttribute"]


@settings(max_examples=500, deadline=None)
@given(text=st.text(max_size=60))
def test_arbitrary_text_compiles_or_raises_parse_error(text: str) -> None:
    """Property: any Unicode text (control characters, surrogates, quotes...) is either an
    expression or a ParseError pointing inside it; nothing else escapes the compiler."""
    try:
        sql.compile(text)
    except sql.ParseError as error:
        position = error.position
    else:
        position = 0
    assert 0 <= position <= len(text)

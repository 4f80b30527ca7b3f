"""LIKE (CESQL v1 §3.5.4): wildcards, escapes, code points, and linear time on hostile input."""

from __future__ import annotations

import functools

import pytest
from cefilters import sql
from cefilters.sql.like import compile_like
from hypothesis import given, settings
from hypothesis import strategies as st


def reference_like(text: str, pattern: str) -> bool:
    """A plain dynamic-programming matcher, written independently as the oracle."""
    tokens: list[tuple[str, str]] = []  # ("lit", c) | ("one", "") | ("any", "")
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern) and pattern[i + 1] in "%_":
            tokens.append(("lit", pattern[i + 1]))
            i += 2
            continue
        c = pattern[i]
        tokens.append(("any", "") if c == "%" else ("one", "") if c == "_" else ("lit", c))
        i += 1

    @functools.cache
    def match(t: int, p: int) -> bool:
        if p == len(tokens):
            return t == len(text)
        kind, char = tokens[p]
        if kind == "any":
            return match(t, p + 1) or (t < len(text) and match(t + 1, p))
        if t == len(text):
            return False
        return (kind == "one" or text[t] == char) and match(t + 1, p + 1)

    return match(0, 0)


@pytest.mark.parametrize(
    ("text", "pattern", "expected"),
    [
        ("", "", True),
        ("", "%", True),
        ("", "_", False),
        ("a", "", False),
        ("abc", "%%", True),
        ("abc", "a%%c", True),
        ("a\nb", "a_b", True),
        ("a\nb", "a%", True),
        ("50%", "50\\%", True),
        ("50x", "50\\%", False),
        ("a\\b", "a\\b", True),
        ("a\\%", "a\\\\%", True),
        ("ab", "a\\", False),
        ("a\\", "a\\", True),
        ("ABC", "abc", False),
        ("aXbXc", "a_b_c", True),
        ("aaa", "a%a%a", True),
        ("aa", "a%a%a", False),
        ("xaby", "%a_%y", True),
        ("abab", "%ab_", False),
        ("abcab", "%ab_", False),
        ("abcabc", "%ab_", True),
    ],
)
def test_like_cases(text: str, pattern: str, expected: bool) -> None:
    """% is any run (also empty), _ one code point (a newline too), \\% \\_ literal; matching
    is case-sensitive over the whole value."""
    assert compile_like(pattern).match(text) is expected
    assert reference_like(text, pattern) is expected


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(alphabet="ab%_\\\n", max_size=12),
    pattern=st.text(alphabet="ab%_\\", max_size=10),
)
def test_like_matcher_equals_the_reference(text: str, pattern: str) -> None:
    """Property: the linear matcher agrees with a plain dynamic-programming matcher."""
    assert compile_like(pattern).match(text) is reference_like(text, pattern)


@settings(max_examples=100, deadline=None)
@given(
    text=st.text(max_size=8),
    pattern=st.text(alphabet=st.sampled_from(["%", "_", "\\", "é", "😀", "a"]), max_size=6),
)
def test_like_expression_equals_the_reference_on_unicode(text: str, pattern: str) -> None:
    """Property: through the full engine (quoting and all) on arbitrary Unicode values."""
    quoted = "'" + pattern.replace("'", "\\'") + "'"
    if pattern.endswith("\\"):
        quoted = "'" + pattern + " '"  # a trailing backslash would escape the closing quote
        pattern += " "
    result = sql.compile(f"x LIKE {quoted}").evaluate({"x": text})
    assert result.errors == []
    assert result.value is reference_like(text, pattern)


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("%a%a%a%a%a%a%a%a%a%a%b", "a" * 200_000),
        ("%a_a_a_a_a_a_a_a_a_b%", "a" * 200_000),
        ("%" + "_" * 2000 + "b", "a" * 200_000),
        ("%" + "a" * 1000 + "b%", "a" * 200_000),
        ("%" + "a_" * 500 + "b%", "a" * 20_000),
    ],
    ids=["many-percent", "underscores-between-percent", "long-underscore-run", "long-literal", "long-mixed"],
)
def test_hostile_patterns_do_not_backtrack(pattern: str, text: str) -> None:
    """Hostile input: patterns that make a backtracking regex engine take exponential (or high
    polynomial) time finish here in one pass (the timeout only guards against a hang)."""
    compiled = sql.compile(f"x LIKE '{pattern}'")
    result = compiled.evaluate({"x": text})
    assert result.errors == []
    assert result.value is False
    assert compiled.matches({"x": text + "b"}) is True

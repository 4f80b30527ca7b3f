"""The spec's open questions, decided on purpose (see docs/filters-cesql.md, "Decisions").

Each test pins one decision, so changing it is a visible, deliberate act.
"""

from __future__ import annotations

import pytest
from cefilters import sql


def value_of(expression: str, event: dict[str, object] | None = None) -> object:
    result = sql.compile(expression).evaluate(event or {})
    assert result.errors == [], result.errors
    return result.value


def error_of(expression: str, event: dict[str, object] | None = None) -> tuple[object, str]:
    result = sql.compile(expression).evaluate(event or {})
    assert len(result.errors) == 1, result
    return result.value, result.errors[0].kind


# -- AND / OR / XOR: one precedence level, evaluated left to right -------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # Left to right: (false AND false) OR true. Right-associative (the ANTLR grammar's
        # <assoc=right>) would give false AND (false OR true) = false.
        ("false AND false OR true", True),
        # (TRUE XOR TRUE) AND FALSE; right-associative: TRUE XOR (TRUE AND FALSE) = true.
        ("TRUE XOR TRUE AND FALSE", False),
        # Unlike SQL, AND does not bind tighter than OR: (TRUE OR FALSE) AND FALSE.
        ("TRUE OR FALSE AND FALSE", False),
        ("FALSE AND TRUE OR TRUE AND TRUE", True),
        ("TRUE XOR FALSE XOR TRUE", False),
    ],
)
def test_logic_operators_share_one_level_and_associate_left(expression: str, expected: bool) -> None:
    """CESQL v1 §3.6: AND, OR and XOR have one precedence and evaluate left to right."""
    assert value_of(expression) is expected


def test_short_circuit_holds_inside_a_mixed_run() -> None:
    """CESQL v1 §3.4.1: in (false AND 1/0 = 0) OR true the division is never evaluated."""
    assert value_of("false AND (1 / 0 = 0) OR true") is True
    assert error_of("true AND (1 / 0 = 0) OR true") == (False, "math")


def test_comparisons_associate_left() -> None:
    """CESQL v1 §3.6: (1 = 1) = TRUE."""
    assert value_of("1 = 1 = TRUE") is True
    assert value_of("3 > 2 = TRUE") is True


# -- Integer overflow: 32-bit, overflow is a math error ------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "2147483647 + 1",
        "-2147483648 - 1",
        "65536 * 65536",
        "-2147483648 / -1",
        "- -2147483648",
        "ABS(-2147483648) + 0",
    ],
)
def test_arithmetic_overflow_is_a_math_error(expression: str) -> None:
    """CESQL v1 §3.1 Integer is signed 32-bit; we raise a math error rather than wrap."""
    assert error_of(expression) == (0, "math")


def test_results_at_the_32_bit_limits_are_fine() -> None:
    """CESQL v1 §3.1: the full range -2147483648..2147483647 is representable."""
    assert value_of("2147483646 + 1") == 2147483647
    assert value_of("-2147483647 - 1") == -2147483648
    assert value_of("-2147483648") == -2147483648


@pytest.mark.parametrize("expression", ["2147483648", "- 2147483648", "1 + 99999999999999999999"])
def test_integer_literals_beyond_32_bits_do_not_compile(expression: str) -> None:
    """CESQL v1 §3.1: a literal outside the Integer range is a parse error."""
    with pytest.raises(sql.ParseError, match="does not fit in 32 bits"):
        sql.compile(expression)


def test_out_of_range_values_from_strings_and_events() -> None:
    """CESQL v1 §3.7: a String that does not denote a 32-bit Integer is a cast error; an event
    integer outside 32 bits is not a CloudEvents Integer at all (generic error)."""
    assert error_of("INT('2147483648')") == (0, "cast")
    assert value_of("INT('-02147483648')") == -2147483648
    assert error_of("INT(huge)", {"huge": "9" * 100_000}) == (0, "cast")
    assert error_of("big + 1", {"big": 2**40}) == (0, "generic")


# -- Characters, not bytes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("LENGTH('é')", 1),
        ("LENGTH('😀x')", 2),
        ("'é' LIKE '_'", True),
        ("'😀' LIKE '_'", True),
        ("'日本語' LIKE '__語'", True),
        ("SUBSTRING('héllo', 2, 1)", "é"),
        ("LEFT('😀abc', 1)", "😀"),
        ("RIGHT('abc😀', 1)", "😀"),
        # Code points, not grapheme clusters: e + combining acute accent is two characters.
        ("LENGTH('e\u0301')", 2),
    ],
)
def test_strings_are_measured_in_unicode_code_points(expression: str, expected: object) -> None:
    """CESQL v1 §3.1 String is a sequence of Unicode characters: LENGTH, LIKE's _ and
    SUBSTRING/LEFT/RIGHT count code points, not UTF-8 bytes."""
    assert value_of(expression) == expected


# -- Unicode case mapping ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("UPPER('straße')", "STRASSE"),
        ("LOWER('ÀÉÎ')", "àéî"),
        ("UPPER('ǆ')", "Ǆ"),
        ("LOWER('İ')", "i̇"),
        ("LENGTH(UPPER('ß'))", 2),
    ],
)
def test_upper_and_lower_use_full_unicode_default_case_mapping(expression: str, expected: object) -> None:
    """CESQL v1 §3.7 leaves the mapping open: we use Unicode's full default case conversion
    (SpecialCasing included, locale-independent), so a string may change length."""
    assert value_of(expression) == expected


def test_the_string_to_boolean_cast_is_ascii_case_insensitive_only() -> None:
    """CESQL v1 §3.7: 'true'/'false' in any ASCII case; no Unicode look-alikes."""
    assert value_of("BOOL('tRuE')") is True
    assert error_of("BOOL('ＴＲＵＥ')") == (False, "cast")


# -- 5-3: signed literals only where an operand is expected --------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("5-3", 2),
        ("5 -3", 2),
        ("5 - 3", 2),
        ("5+3", 8),
        ("5 +3", 8),
        ("4 + -1", 3),
        ("4 - -1", 5),
        ("-3", -3),
        ("+3", 3),
        ("--10", 10),
        ("-2*3", -6),
        ("(1)-1", 0),
        ("TRUE-1", 0),
        ("ABS(-3)-3", 0),
    ],
)
def test_a_sign_after_an_operand_is_the_binary_operator(expression: str, expected: int) -> None:
    """CESQL v1 §2: the grammar puts the sign in the integer literal, which would make 5-3 two
    adjacent literals; we read the sign as part of a literal only where an operand is expected."""
    assert value_of(expression) == expected


def test_a_sign_after_an_attribute_is_the_binary_operator() -> None:
    """CESQL v1 §2: hop-1 subtracts (hop is an operand)."""
    assert value_of("hop-1", {"hop": 5}) == 4


def test_plus_is_not_a_unary_operator() -> None:
    """CESQL v1 §2 has unary NOT and -, but no unary +: only a literal may carry a + sign."""
    with pytest.raises(sql.ParseError):
        sql.compile("+ 3")
    with pytest.raises(sql.ParseError):
        sql.compile("+hop")


# -- Doubled quotes ------------------------------------------------------------------------------


def test_doubled_quotes_are_not_an_escape() -> None:
    """CESQL v1 §2: only \\' (and \\" in double quotes) escapes a quote; 'it''s' is two
    adjacent literals, which is rejected instead of silently read as it''s."""
    with pytest.raises(sql.ParseError):
        sql.compile("'it''s'")
    assert value_of(r"'it\'s'") == "it's"
    assert value_of(r"'a\nb'") == "a\\nb"


# -- Missing functions ---------------------------------------------------------------------------


def test_an_unknown_function_is_an_evaluation_error_by_default() -> None:
    """CESQL v1 §4 / TCK: CONCAT_WS() yields false with a missingFunction error."""
    assert error_of("NOPE(1)") == (False, "missingFunction")
    assert error_of("ABS(1, 2)") == (False, "missingFunction")


def test_strict_functions_rejects_an_unknown_function_at_compile_time() -> None:
    """A filter that can never evaluate without error is refused up front on request."""
    with pytest.raises(sql.ParseError) as raised:
        sql.compile("type = 'a' AND nope(1)", strict_functions=True)
    assert raised.value.kind == "missingFunction"
    assert raised.value.position == 15
    assert "NOPE taking 1 argument" in str(raised.value)
    assert sql.compile("abs(-1) = 1", strict_functions=True).matches({})

"""``SubscriptionIndex.explain`` and the explain path of every compiled filter.

The property tests reuse the generators of ``test_index_equivalence.py``: every dialect, nested
``all``/``any``/``not``, random CESQL with cast-prone literals, ``source`` and ``types``, and events
with integers, booleans, floats, bytes, datetimes and missing attributes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import cefilters
import pytest
from cefilters.dialects import cel
from cefilters.dialects.logical import AllFilter, AnyFilter, NotFilter
from cefilters.errors import pointer_token
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filters.test_index_equivalence import EVENT, EXPRESSION, OPERATION, Subscription


@pytest.fixture(autouse=True, scope="module")
def _cel_environment() -> None:
    """Build cel-python's environment (which raises the recursion limit) before hypothesis runs."""
    cel.environment()


def expected_pointers(expression: Mapping[str, Any], pointer: str) -> list[str]:
    """The pointers ``explain`` must report for one expression of the document, in order."""
    ((dialect, value),) = expression.items()
    found = [pointer]
    if dialect in ("all", "any"):
        for i, child in enumerate(value):
            found += expected_pointers(child, f"{pointer}/{dialect}/{i}")
    elif dialect == "not":
        found += expected_pointers(value, f"{pointer}/not")
    elif dialect in ("exact", "prefix", "suffix") and len(value) > 1:
        found += [f"{pointer}/{dialect}/{pointer_token(name)}" for name in value]
    return found


def document_pointers(subscription: Subscription) -> list[str]:
    found = [] if subscription.source is None else ["/source"]
    found += [] if subscription.types is None else ["/types"]
    for i, expression in enumerate(subscription.filters):
        found += expected_pointers(expression, f"/filters/{i}")
    return found


def assert_nodes_agree(filter_: cefilters.Filter, event: dict[str, object]) -> None:
    """Every compiled node's explain verdict is its own ``matches``, all the way down."""
    assert isinstance(filter_, cefilters.Explainable)
    assert filter_.explain(event, "/x")[0].matched is filter_.matches(event)
    if isinstance(filter_, AllFilter | AnyFilter):
        for child in filter_.children:
            assert_nodes_agree(child, event)
    elif isinstance(filter_, NotFilter):
        assert_nodes_agree(filter_.child, event)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(OPERATION, max_size=20), events=st.lists(EVENT, min_size=1, max_size=6))
def test_explain_verdict_is_the_index_verdict(
    operations: list[tuple[int, Subscription | None]], events: list[dict[str, object]]
) -> None:
    """After any adds, replacements and removals, ``explain(key).matched == key in match()``, and
    the checks name exactly the conditions of the subscription as written, in document order."""
    index: cefilters.SubscriptionIndex[int] = cefilters.SubscriptionIndex()
    live: dict[int, Subscription] = {}
    for key, subscription in operations:
        if subscription is None:
            index.remove(key)
            live.pop(key, None)
        else:
            index.add(key, subscription.filters, source=subscription.source, types=subscription.types)
            live[key] = subscription
    for event in events:
        matched = index.match(event)
        for key, subscription in live.items():
            explanation = index.explain(key, event)
            assert explanation.matched is (key in matched)
            assert [check.pointer for check in explanation.checks] == document_pointers(subscription)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=EXPRESSION, events=st.lists(EVENT, min_size=1, max_size=6))
def test_every_node_explains_its_own_match(
    expression: dict[str, Any], events: list[dict[str, object]]
) -> None:
    """At every depth, a filter's first check holds exactly when its ``matches`` does."""
    compiled = cefilters.compile([expression])
    for event in events:
        assert_nodes_agree(compiled, event)


def explain(
    filters: list[dict[str, Any]], event: dict[str, object], **constraints: Any
) -> cefilters.Explanation:
    index: cefilters.SubscriptionIndex[str] = cefilters.SubscriptionIndex()
    index.add("s", filters, **constraints)
    return index.explain("s", event)


def details(explanation: cefilters.Explanation) -> dict[str, tuple[bool, str]]:
    return {check.pointer: (check.matched, check.detail) for check in explanation.checks}


def test_attribute_dialects_say_what_was_compared() -> None:
    event: dict[str, object] = {"subject": "us/42", "type": "com.example.a", "seq": 42}
    found = details(
        explain(
            [
                {"prefix": {"subject": "eu/"}},
                {"suffix": {"subject": "/42"}},
                {"exact": {"seq": "42"}},
                {"exact": {"region": "eu"}},
            ],
            event,
        )
    )
    assert found["/filters/0"] == (False, "prefix of subject: 'eu/' does not start 'us/42'")
    assert found["/filters/1"] == (True, "suffix of subject: '/42' ends 'us/42'")
    assert found["/filters/2"] == (True, "exact seq: '42' (int) equals '42'")
    assert found["/filters/3"] == (False, "exact region: the event has no region")


def test_multi_attribute_filter_reports_each_attribute() -> None:
    explanation = explain([{"exact": {"type": "a", "source": "/s"}}], {"type": "a", "source": "/t"})
    assert not explanation.matched
    assert details(explanation) == {
        "/filters/0": (False, "exact: 1 of 2 attributes matched; exact source: '/t' does not equal '/s'"),
        "/filters/0/exact/type": (True, "exact type: 'a' equals 'a'"),
        "/filters/0/exact/source": (False, "exact source: '/t' does not equal '/s'"),
    }


def test_source_and_types_come_first() -> None:
    explanation = explain(
        [{"prefix": {"subject": "a"}}],
        {"type": "t9", "source": "/s", "subject": "ab"},
        source="/s",
        types=["t1", "t2"],
    )
    assert not explanation.matched
    assert [(c.pointer, c.matched) for c in explanation.checks] == [
        ("/source", True),
        ("/types", False),
        ("/filters/0", True),
    ]
    assert explanation.checks[1].detail == "type 't9' is not one of 't1', 't2'"


def test_empty_types_and_no_filters() -> None:
    assert details(explain([], {"type": "t"}, types=[])) == {
        "/types": (False, "types is an empty list, which admits no event")
    }
    everything = explain([], {})
    assert everything.matched
    assert everything.checks == ()


def test_sql_filter_reports_its_value_or_error() -> None:
    found = details(
        explain(
            [
                {"sql": "amount > 100"},
                {"sql": "priority * 2"},
                {"sql": "subject LIKE 'eu/%'"},
                {"sql": "INT(x) = 1"},
            ],
            {"priority": 21, "subject": "eu/1", "x": "abc"},
        )
    )
    assert found["/filters/0"] == (False, "sql: missingAttribute error: the event has no attribute 'amount'")
    assert found["/filters/1"] == (False, "sql: the value is the Integer 42, not the Boolean true")
    assert found["/filters/2"] == (True, "sql: the value is true")
    matched, detail = found["/filters/3"]
    assert not matched
    assert detail.startswith("sql: cast error: ")


@pytest.mark.parametrize(
    ("flag", "detail"),
    [
        (True, "sql: the value is true"),
        (False, "sql: the value is false"),
        (1, "sql: the value is the Integer 1, not the Boolean true"),
        ("true", "sql: the value is the String 'true', not the Boolean true"),
    ],
)
def test_sql_passes_only_on_the_boolean_true(flag: object, detail: str) -> None:
    """A bare attribute reference yields the attribute's own value; only the Boolean passes."""
    explanation = explain([{"sql": "flag"}], {"flag": flag})
    assert explanation.matched is (flag is True)
    assert explanation.checks == (cefilters.Check("/filters/0", flag is True, detail),)


def test_cel_filter_reports_its_result_or_error() -> None:
    found = details(
        explain(
            [{"cel": "seq > 1"}, {"cel": "seq + 1"}, {"cel": "missing == 1"}, {"cel": "seq > 'a'"}],
            {"seq": 3},
        )
    )
    assert found["/filters/0"] == (True, "cel: the result is true")
    assert found["/filters/1"] == (False, "cel: the result is int 4, not a bool")
    assert found["/filters/2"] == (False, "cel: evaluation error: the event has no attribute 'missing'")
    matched, detail = found["/filters/3"]
    assert not matched
    assert detail.startswith("cel: evaluation error: ")
    assert "activation" not in detail
    assert "celpy" not in detail


def test_logical_filters_summarise_their_children() -> None:
    event: dict[str, object] = {"type": "a", "subject": "x"}
    found = details(
        explain(
            [
                {"all": [{"exact": {"type": "a"}}, {"exact": {"subject": "y"}}]},
                {"any": [{"exact": {"type": "b"}}, {"exact": {"subject": "x"}}]},
                {"not": {"exact": {"type": "a"}}},
            ],
            event,
        )
    )
    assert found["/filters/0"] == (False, "all: 1 of 2 conditions matched; not matched: /filters/0/all/1")
    assert found["/filters/1"] == (True, "any: 1 of 2 conditions matched: /filters/1/any/1")
    assert found["/filters/2"] == (False, "not: /filters/2/not matched, so this condition does not")
    assert found["/filters/2/not"] == (True, "exact type: 'a' equals 'a'")


def test_huge_values_are_cut_in_details() -> None:
    """Neither a megabyte attribute nor an error message about it is copied into a detail."""
    big = "x" * 1_000_000
    explanation = explain(
        [
            {"prefix": {"subject": "y"}},
            {"exact": {"type": "a"}},
            {"sql": "INT(subject) = 1"},
            {"cel": "subject + 1 == 2"},
            {"cel": "subject"},
            {"sql": "subject"},
        ],
        {"subject": big, "type": big},
        types=["t"],
    )
    assert len(explanation.checks) == 7
    for check in explanation.checks:
        assert len(check.detail) < 600, check
    assert "(1000000 characters)" in explanation.checks[1].detail


def test_results_are_frozen_and_unknown_keys_raise() -> None:
    explanation = explain([{"exact": {"type": "a"}}], {"type": "a"})
    for result, field in ((explanation, "matched"), (explanation.checks[0], "detail")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(result, field, "changed")
    index: cefilters.SubscriptionIndex[str] = cefilters.SubscriptionIndex()
    with pytest.raises(KeyError):
        index.explain("nope", {})


def test_compiled_filters_explain_relative_to_the_array() -> None:
    """Outside an index, ``explain`` of a compiled array locates elements as FilterError does."""
    compiled = cefilters.compile([{"exact": {"type": "a"}}, {"all": [{"prefix": {"subject": "s"}}]}])
    assert isinstance(compiled, cefilters.Explainable)
    checks = compiled.explain({"type": "a", "subject": "t"}, "")
    assert [(c.pointer, c.matched) for c in checks] == [
        ("", False),
        ("/0", True),
        ("/1", False),
        ("/1/all/0", False),
    ]


def test_a_filter_from_elsewhere_still_gets_a_check() -> None:
    """A hand-written Filter with only ``matches`` is reported by its verdict."""

    class Even:
        def matches(self, event: Mapping[str, object]) -> bool:
            return event.get("seq") == 2

    index: cefilters.SubscriptionIndex[str] = cefilters.SubscriptionIndex()
    index.add("s", Even())
    explanation = index.explain("s", {"seq": 2})
    assert explanation.matched
    assert explanation.checks == (cefilters.Check("/filters/0", True, "Even matched (it gives no reasons)"),)

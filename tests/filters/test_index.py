"""``SubscriptionIndex``: add / replace / remove / match, source and types, planning choices."""

from __future__ import annotations

import cefilters
import pytest
from cefilters.index.plan import plan
from cefilters.index.subscription_index import SubscriptionIndex

EVENT: dict[str, object] = {
    "specversion": "1.0",
    "id": "e1",
    "type": "com.example.order.created",
    "source": "https://shop.example.com/orders",
    "subject": "orders/42",
    "priority": 3,
}


def test_match_combines_filters_source_and_types() -> None:
    """source: exact match on the event's source; types: the event type must be listed
    (Subscriptions API, subscription ``source`` and ``types``)."""
    index: SubscriptionIndex[str] = cefilters.SubscriptionIndex()
    index.add("by-type", [], types=["com.example.order.created", "com.example.order.paid"])
    index.add("other-type", [], types=["com.example.order.paid"])
    index.add("by-source", [], source="https://shop.example.com/orders")
    index.add("other-source", [], source="https://shop.example.com")
    index.add("prefix", [{"prefix": {"subject": "orders/"}}])
    index.add("suffix-and-not", [{"suffix": {"type": ".created"}}, {"not": {"exact": {"priority": "3"}}}])
    index.add("everything", [])
    index.add("nothing", [], types=[])
    index.add("cel", [{"cel": "priority >= 3"}])
    assert index.match(EVENT) == {"by-type", "by-source", "prefix", "everything", "cel"}
    assert index.match({}) == {"everything"}


def test_add_with_an_existing_key_replaces_it() -> None:
    """add() with an existing key replaces the subscription (documented behaviour)."""
    index: SubscriptionIndex[str] = cefilters.SubscriptionIndex()
    index.add("s", [{"exact": {"type": "com.example.order.created"}}])
    assert index.match(EVENT) == {"s"}
    index.add("s", [{"exact": {"type": "something.else"}}])
    assert index.match(EVENT) == set()
    assert len(index) == 1


def test_invalid_filters_leave_the_index_unchanged() -> None:
    """add() raises FilterError for invalid filters and keeps the previous subscription."""
    index: SubscriptionIndex[str] = cefilters.SubscriptionIndex()
    index.add("s", [{"exact": {"type": "com.example.order.created"}}])
    with pytest.raises(cefilters.FilterError) as caught:
        index.add("s", [{"any": []}])
    assert caught.value.path == "/0/any"
    with pytest.raises(TypeError):
        index.add("s", [], types="com.example.order.created")
    assert index.match(EVENT) == {"s"}
    assert "s" in index
    assert len(index) == 1


def test_unanchored_counts_subscriptions_checked_on_every_event() -> None:
    """Only subscriptions without any indexable condition are evaluated for every event."""
    index: SubscriptionIndex[str] = cefilters.SubscriptionIndex()
    index.add("anchored-sql", [{"sql": "type = 'a' AND priority > 1"}])
    index.add("typed-not", [{"not": {"exact": {"subject": "x"}}}], types=["a"])
    index.add("bare-not", [{"not": {"exact": {"subject": "x"}}}])
    index.add("bare-sql", [{"sql": "priority > 1"}])
    assert index.unanchored == 2
    index.remove("bare-sql")
    assert index.unanchored == 1


def test_remove_forgets_and_ignores_unknown_keys() -> None:
    """remove() drops the key from every table; an unknown key is not an error."""
    index: SubscriptionIndex[str] = cefilters.SubscriptionIndex()
    index.add("a", [{"prefix": {"source": "https://shop."}}])
    index.add("b", [{"any": [{"exact": {"type": "x"}}, {"suffix": {"subject": "/42"}}]}])
    assert index.match(EVENT) == {"a", "b"}
    index.remove("a")
    index.remove("missing")
    assert index.match(EVENT) == {"b"}
    index.remove("b")
    assert index.match(EVENT) == set()
    assert "a" not in index


def test_accepts_a_compiled_filter() -> None:
    """A filter compiled once with cefilters.compile can be indexed as is."""
    index: SubscriptionIndex[int] = cefilters.SubscriptionIndex()
    index.add(1, cefilters.compile([{"exact": {"subject": "orders/42"}}]))
    assert index.match(EVENT) == {1}


def test_match_never_raises_on_odd_values() -> None:
    """match never raises, whatever the event holds."""
    index: SubscriptionIndex[int] = cefilters.SubscriptionIndex()
    index.add(1, [{"prefix": {"type": "a"}}])
    index.add(2, [{"suffix": {"subject": "a"}}, {"not": {"exact": {"id": "x"}}}])
    index.add(3, [{"cel": "type == 1"}])
    assert index.match({"type": ["a"], "subject": {"a": 1}, "id": None}) == set()
    assert index.match({"type": 1.5, "subject": b"a"}) == set()


def test_plan_anchors_on_the_smallest_bucket() -> None:
    """The planner picks the anchor with the fewest subscriptions already stored under it, and
    drops an anchor that proves its conjunct from the residual."""
    sizes = {("exact", "type", "t"): 1000.0, ("exact", "subject", "s"): 1.0}
    chosen = plan(
        cefilters.compile([{"exact": {"type": "t", "subject": "s"}}]), None, None, lambda a: sizes.get(a, 1.0)
    )
    assert chosen.anchors == (("exact", "subject", "s"),)
    assert repr(chosen.residual) == "ExactFilter({'type': 't'})"


def test_plan_any_of_indexable_branches_is_anchored_under_each() -> None:
    """An ``any`` whose branches are all indexable is stored under each branch, and needs no
    residual when each branch is a single attribute test."""
    chosen = plan(
        cefilters.compile([{"any": [{"exact": {"type": "a"}}, {"prefix": {"source": "b"}}]}]),
        None,
        None,
        lambda a: 1.0,
    )
    assert chosen.anchors == (("exact", "type", "a"), ("prefix", "source", "b"))
    assert chosen.residual is None


def test_plan_without_anything_indexable_checks_every_event() -> None:
    """``not``/``cel`` alone give no anchor: the subscription is checked on every event."""
    chosen = plan(cefilters.compile([{"not": {"exact": {"type": "a"}}}]), None, None, lambda a: 1.0)
    assert chosen.anchors == ()
    assert chosen.residual is not None


@pytest.mark.parametrize(
    ("expression", "event"),
    [
        ("'01' = seq", {"seq": 1}),  # the literal is cast to Integer: 1 = 1
        ("seq IN ('+1', 'x')", {"seq": 1}),
        ("'TRUE' = flag", {"flag": True}),  # cast to Boolean, case-insensitively
        ("flag IN ('False')", {"flag": False}),
        ("seq = '2'", {"seq": 2.0}),  # an integral float is an Integer
        ("bin = 'YWI='", {"bin": b"ab"}),  # Binary compares as base64
        ("subject LIKE '42%'", {"subject": 42}),
        ("(type = 'a') OR (seq > 0)", {"type": "b", "seq": 1}),
        ("(type = 'a') XOR (seq > 0)", {"type": "b", "seq": 1}),
        ("type = 'a' AND subject LIKE 'x_z%'", {"type": "a", "subject": "xyz!"}),
    ],
)
def test_sql_subscriptions_are_indexed_without_losing_matches(
    expression: str, event: dict[str, object]
) -> None:
    """A sql filter is anchored on the attribute conditions it implies; casts that make a literal
    equal to a non-string (CESQL v1 section 3.7 implicit casts) must not make the index miss."""
    assert cefilters.sql.compile(expression).matches(event)
    index: SubscriptionIndex[int] = cefilters.SubscriptionIndex()
    index.add(1, [{"sql": expression}])
    assert index.match(event) == {1}


def test_sql_with_an_attribute_condition_is_anchored() -> None:
    """``type = '...' AND ...`` is stored under its type, not checked on every event."""
    chosen = plan(cefilters.compile([{"sql": "type = 'a' AND priority > 5"}]), None, None, lambda a: 1.0)
    assert chosen.anchors == (("exact", "type", "a"),)
    assert repr(chosen.residual) == "SqlFilter(\"type = 'a' AND priority > 5\")"
    unanchored = plan(cefilters.compile([{"sql": "'01' = seq OR priority > 5"}]), None, None, lambda a: 1.0)
    assert unanchored.anchors == ()


def test_hand_built_filters_with_empty_affixes_still_match() -> None:
    """Filters built directly (not from JSON) may hold an empty prefix; it must not be an anchor."""
    from cefilters.dialects.prefix import PrefixFilter
    from cefilters.dialects.suffix import SuffixFilter

    index: SubscriptionIndex[int] = cefilters.SubscriptionIndex()
    index.add(1, PrefixFilter((("type", ""),)))
    index.add(2, SuffixFilter((("type", ""), ("subject", "42"))))
    assert index.match(EVENT) == {1, 2}
    assert index.match({"subject": "x"}) == set()

"""Property: ``SubscriptionIndex.match`` returns exactly what a linear scan of the filters returns.

CloudEvents SQL filters are indexed through the conditions they imply, so the generated SQL
includes literals that equal non-strings through casts (``'042' = 42``, ``'TRUE' = true``), LIKE
patterns with ``_``, ``%`` and backslashes, and events with integral floats, bytes and datetimes.

Issue requirement (Speed): "Property-based tests (hypothesis) show index.match equals the linear
scan over random filters and events, including after removals." Values come from a tiny alphabet
so that exact, prefix and suffix anchors collide often and every index path is exercised.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any
from unittest import mock

import cefilters
import pytest
from cefilters.base import canonical_string
from cefilters.dialects import cel
from cefilters.index import tables
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@pytest.fixture(autouse=True, scope="module")
def _cel_environment() -> None:
    """Build cel-python's environment (which raises the recursion limit) before hypothesis runs."""
    cel.environment()


NAMES = ("type", "source", "subject", "seq", "flag")
TEXT = st.text(alphabet="ab1", min_size=1, max_size=3)
VALUES = st.one_of(TEXT, st.sampled_from(["true", "false", "1", "11"]))
# CESQL literals, including ones that compare equal to non-strings through casts.
SQL_TEXT = st.one_of(
    TEXT, st.sampled_from(["01", "+1", "-0", "0", "1", "TRUE", "True", "true", "2", "YWI=", "2026", ""])
)
# A trailing backslash would escape the literal's closing quote.
SQL_PATTERN = st.text(alphabet="ab1%_\\", max_size=4).filter(lambda p: not p.endswith("\\"))


def _sql_leaf() -> st.SearchStrategy[str]:
    name = st.sampled_from(NAMES)
    return st.one_of(
        st.builds("{} = '{}'".format, name, SQL_TEXT),
        st.builds("'{1}' = {0}".format, name, SQL_TEXT),
        st.builds("{} IN ('{}', '{}')".format, name, SQL_TEXT, SQL_TEXT),
        st.builds("{} LIKE '{}'".format, name, SQL_PATTERN),
        st.builds("{} NOT LIKE '{}'".format, name, SQL_PATTERN),
        st.sampled_from(["seq > 0", "flag", "EXISTS subject"]),
    )


SQL = st.recursive(
    _sql_leaf(),
    lambda inner: st.one_of(
        st.builds("({}) {} ({})".format, inner, st.sampled_from(["AND", "OR", "XOR"]), inner),
        st.builds("NOT ({})".format, inner),
    ),
    max_leaves=3,
)


def attribute_map() -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(st.sampled_from(NAMES), VALUES, min_size=1, max_size=2)


LEAF = st.one_of(
    st.builds(lambda text: {"sql": text}, SQL),
    st.builds(lambda m: {"exact": m}, attribute_map()),
    st.builds(lambda m: {"prefix": m}, attribute_map()),
    st.builds(lambda m: {"suffix": m}, attribute_map()),
    st.sampled_from(
        [
            {"cel": 'type == "ab"'},
            {"cel": "seq > 0"},
            {"sql": "seq > 0 OR flag"},
            {"sql": "type LIKE 'a%b'"},
            {"sql": "EXISTS subject AND subject <> 'a'"},
        ]
    ),
)


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda c: {"all": c}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda c: {"any": c}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda c: {"not": c}, children),
    )


EXPRESSION = st.recursive(LEAF, _extend, max_leaves=6)
FILTERS = st.lists(EXPRESSION, max_size=3)
EVENT_VALUE = st.one_of(
    VALUES,
    st.sampled_from(["042", "TRUE", "YWI=", "2"]),
    st.integers(-2, 12),
    st.booleans(),
    st.none(),
    st.sampled_from([0.5, 2.0, 1e300, b"ab", datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)]),
)
EVENT = st.dictionaries(st.sampled_from(NAMES), EVENT_VALUE, max_size=len(NAMES))


@dataclass(frozen=True)
class Subscription:
    filters: list[dict[str, Any]]
    source: str | None
    types: list[str] | None


SUBSCRIPTION = st.builds(
    Subscription,
    filters=FILTERS,
    source=st.none() | TEXT,
    types=st.none() | st.lists(VALUES, max_size=3),
)
OPERATION = st.tuples(st.integers(0, 7), st.none() | SUBSCRIPTION)  # None removes the key


def accepts(subscription: Subscription, event: dict[str, object]) -> bool:
    """The reference: the subscription's constraints checked one by one."""
    if subscription.source is not None and canonical_string(event.get("source")) != subscription.source:
        return False
    if subscription.types is not None and canonical_string(event.get("type")) not in subscription.types:
        return False
    return cefilters.compile(subscription.filters).matches(event)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    operations=st.lists(OPERATION, max_size=25),
    events=st.lists(EVENT, min_size=1, max_size=6),
    short_limit=st.sampled_from([1, 2, tables.SHORT_LIMIT]),
)
def test_index_matches_linear_scan(
    operations: list[tuple[int, Subscription | None]], events: list[dict[str, object]], short_limit: int
) -> None:
    """After any sequence of adds, replacements and removals, match == the linear scan.

    ``short_limit`` moves the generated prefixes and suffixes (one to three characters) between
    the directly probed tier and the grouped one, so both layouts of the tables are exercised."""
    index: cefilters.SubscriptionIndex[int] = cefilters.SubscriptionIndex()
    live: dict[int, Subscription] = {}
    with mock.patch.object(tables, "SHORT_LIMIT", short_limit):  # read when a table is created
        for key, subscription in operations:
            if subscription is None:
                index.remove(key)
                live.pop(key, None)
            else:
                index.add(key, subscription.filters, source=subscription.source, types=subscription.types)
                live[key] = subscription
    assert len(index) == len(live)
    for event in events:
        expected = {key for key, subscription in live.items() if accepts(subscription, event)}
        assert index.match(event) == expected


@settings(max_examples=100, deadline=None)
@given(subscriptions=st.lists(SUBSCRIPTION, max_size=10), events=st.lists(EVENT, max_size=4))
def test_removing_everything_leaves_an_empty_index(
    subscriptions: list[Subscription], events: list[dict[str, object]]
) -> None:
    """Removal undoes add completely: no key survives in any table."""
    index: cefilters.SubscriptionIndex[int] = cefilters.SubscriptionIndex()
    for key, subscription in enumerate(subscriptions):
        index.add(key, subscription.filters, source=subscription.source, types=subscription.types)
    for key in range(len(subscriptions)):
        index.remove(key)
    assert len(index) == 0
    assert index._tables == {}  # internal: every bucket and length count was released
    for event in events:
        assert index.match(event) == set()


@settings(max_examples=300, deadline=None)
@given(
    expressions=st.lists(SQL, min_size=1, max_size=6),
    events=st.lists(EVENT, min_size=1, max_size=8),
)
def test_index_of_sql_filters_matches_the_engine(
    expressions: list[str], events: list[dict[str, object]]
) -> None:
    """sql-only subscriptions are anchored on the conditions their expression implies; the result
    must still be exactly the engine's verdict, whatever the attribute types."""
    index: cefilters.SubscriptionIndex[int] = cefilters.SubscriptionIndex()
    for key, text in enumerate(expressions):
        index.add(key, [{"sql": text}])
    for event in events:
        expected = {key for key, text in enumerate(expressions) if cefilters.sql.compile(text).matches(event)}
        assert index.match(event) == expected


AFFIX = st.text(alphabet="ab", min_size=1, max_size=10)
ATTRIBUTE_SUBSCRIPTION = st.tuples(st.sampled_from(["exact", "prefix", "suffix"]), AFFIX)


@settings(max_examples=300, deadline=None)
@given(
    operations=st.lists(st.tuples(st.integers(0, 15), st.none() | ATTRIBUTE_SUBSCRIPTION), max_size=40),
    values=st.lists(st.text(alphabet="ab", max_size=12), min_size=1, max_size=10),
    short_limit=st.sampled_from([1, 3, tables.SHORT_LIMIT]),
)
def test_attribute_tables_match_linear_scan(
    operations: list[tuple[int, tuple[str, str] | None]], values: list[str], short_limit: int
) -> None:
    """The exact/prefix/suffix tables alone, densely: one attribute, a two-letter alphabet, values
    of 1 to 10 characters, so prefixes share leading characters, regroup as shorter ones arrive,
    and land in both the directly probed and the grouped tier."""
    index: cefilters.SubscriptionIndex[int] = cefilters.SubscriptionIndex()
    live: dict[int, cefilters.Filter] = {}
    with mock.patch.object(tables, "SHORT_LIMIT", short_limit):
        for key, subscription in operations:
            if subscription is None:
                index.remove(key)
                live.pop(key, None)
            else:
                kind, value = subscription
                live[key] = cefilters.compile([{kind: {"subject": value}}])
                index.add(key, live[key])
    for value in values:
        event = {"subject": value}
        assert index.match(event) == {key for key, f in live.items() if f.matches(event)}
    table = index._tables.get("subject")
    if table is not None:  # internal: the length bookkeeping describes exactly what is stored
        for side in (table.prefix, table.suffix):
            stored = {*side.sure, *side.check}
            assert side.short.lengths == sorted({len(v) for v in stored if len(v) < short_limit})
            grouped = {(k, n) for k, group in side.groups.items() for n in group.lengths}
            assert grouped == {(side._group_key(v), len(v)) for v in stored if len(v) >= short_limit}

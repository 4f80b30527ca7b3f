"""The fast path of a transformation whose expression is a map literal (``transform.shaped``):
whatever the expression and the event, it gives exactly what the general path (the evaluator,
the conversion and the output's checks) gives: the same event with its members in the same
order, the same destination and ``$delivery``, or it leaves the event to the general path,
which gives the failure. Property tests over generated expressions (map literals of constants,
member reads, computed members and nested literals) and events (valid ones and near misses),
with budgets small enough to be exceeded; and the value rule the fast path checks attributes
by, held to the full event check."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from ceprotocols.sender import Destination
from hypothesis import given, settings
from hypothesis import strategies as st

from cebroker.contracts import ValidationMode, Violation
from cebroker.pipeline.transform import Failed, Outgoing, apply, output_check, prepare, shaped, transform
from cebroker.pipeline.transform.engine import Budget, compile_cel
from cebroker.pipeline.transform.shaped import plan_of
from cebroker.pipeline.transform.spec import BUDGET, Transformation, parse_transform
from cebroker.pipeline.wellformed import any_text_accepted, event_problems, name_accepted, value_accepted

TYPICAL = (
    '{"type": event.type, "source": "/partner", "origin": event.source, "topic": event.subject,'
    ' "datacontenttype": "application/json",'
    ' "data": {"order": event.data.order, "amount": event.data.amount, "currency": event.data.currency}}'
)
ORDER: dict[str, Any] = {
    "specversion": "1.0",
    "id": "o-1",
    "source": "/shop",
    "type": "com.example.order",
    "subject": "orders/1",
    "datacontenttype": "application/json",
    "data": {"order": 1, "amount": 12.5, "currency": "EUR", "lines": [{"sku": "a"}]},
}
HTTP = Destination(protocol="HTTP", sink="https://sink.example/base", settings={})
DESTINATIONS = [
    HTTP,
    Destination(protocol="KAFKA", sink="kafka://k:9092/t", settings={}),
    Destination(protocol="KAFKA", sink="kafka://k:9092/t", settings={"partitionkeyextractor": "region"}),
    Destination(protocol="MQTT5", sink="mqtt://m:1883", settings={"topicname": "a"}),
]

#: Output member names: the event's own, extensions, invalid ones, the reserved ones.
KEYS = st.sampled_from(
    [
        "specversion",
        "id",
        "replayid",
        "source",
        "type",
        "subject",
        "time",
        "datacontenttype",
        "dataschema",
        "data",
        "data_base64",
        "origin",
        "topic",
        "partitionkey",
        "region",
        "Bad",
        "$delivery",
        "headers",
        "key",
        "path",
    ]
)
#: Constants as CEL text: scalars of every kind, folded lists and maps, bytes, a timestamp.
CONSTANTS = st.sampled_from(
    [
        '""',
        '"/partner"',
        '"t"',
        '"1.0"',
        '"o-1"',
        '"application/json"',
        '"text/plain"',
        '"2024-02-29T10:00:00Z"',
        '"not a time"',
        '"x-a"',
        '"/p?q=1"',
        "1",
        "-7",
        "2147483648",
        "1.5",
        "1u",
        "true",
        "null",
        'b"xy"',
        '[1, "a"]',
        '{"k": 1}',
        'timestamp("2024-01-01T00:00:00Z")',
    ]
)
#: Member selections of the event (some of which do not exist, or are not maps).
PATHS = st.sampled_from(
    [
        "event",
        "event.type",
        "event.source",
        "event.subject",
        "event.id",
        "event.specversion",
        "event.replayid",
        "event.time",
        "event.region",
        "event.missing",
        "event.data",
        "event.data.order",
        "event.data.amount",
        "event.data.currency",
        "event.data.lines",
        "event.data.note",
        "event.data.order.deeper",
        'event["data"]["currency"]',
        'event.data["lines"]',
        "event.datacontenttype",
    ]
)


#: What most outputs hold: attributes that take strings, given strings.
USUAL_KEYS = st.sampled_from(["subject", "origin", "topic", "region", "dataschema", "data"])
USUAL_VALUES = st.sampled_from(
    ['"/partner"', '"x-a"', "event.source", "event.subject", "event.data.currency", 'event.type + "-x"']
)


#: Computed members (evaluated by their closures on the fast path), some failing on some events.
COMPUTED = st.sampled_from(
    [
        'event.type + "-x"',
        "event.source + event.source + event.source",
        "size(event.data)",
        'has(event.subject) ? event.subject : "none"',
        "event.data.order * 2",
        "int(event.data.amount)",
        "string(event.data.order)",
        "[event.type, event.source]",
        "event.data.lines.map(l, l.sku)",
        "event.data.lines.map(l, event.source + event.source)",
        "event.data.missing + 1",
        "timestamp(event.time)",
        "event.type.size() > 3",
        "1u + event.data.order",
        "{event.type: 1}",
        "b'x' + b'y'",
    ]
)


def _record(depth: int) -> st.SearchStrategy[str]:
    value: st.SearchStrategy[str] = CONSTANTS | PATHS | COMPUTED
    if depth < 2:
        value = value | st.deferred(lambda: _record(depth + 1))
    usual = st.dictionaries(USUAL_KEYS, st.one_of(USUAL_VALUES, USUAL_VALUES, value), max_size=4)
    entries = st.one_of(usual, usual, st.dictionaries(KEYS, value, max_size=7))
    return entries.map(
        lambda members: "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in members.items()) + "}"
    )


@st.composite
def expressions(draw: st.DrawFn) -> str:
    """A map literal that usually has a source and a type, then random members."""
    text = draw(_record(0))
    inner = text[1:-1]
    base = draw(
        st.sampled_from(
            [
                '"source": event.source, "type": event.type',
                '"source": event.source, "type": event.type',
                '"source": "/s", "type": event.type',
                '"source": "/s", "type": "t"',
                '"type": "t"',
                "",
            ]
        )
    )
    # Some keep their own source or type, or have none.
    if base and not any(f'"{name}":' in inner for name in ("source", "type")):
        inner = f"{base}, {inner}" if inner else base
    return "{" + inner + "}"


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**33), max_value=2**33),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["", "1.0", "/s", "EUR", "2024-02-29T10:00:00Z", "2024-02-30T10:00:00Z", "x" * 40]),
    st.text(max_size=6),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["order", "currency", "a"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly valid stored events: the typical order, then members changed, added or removed."""
    event: dict[str, Any] = json.loads(json.dumps(ORDER))
    for _ in range(draw(st.sampled_from([0, 0, 1, 2, 3]))):
        name = draw(
            st.sampled_from(["subject", "time", "region", "replayid", "id", "specversion", "source", "type"])
        )
        event[name] = draw(SCALARS)
    for _ in range(draw(st.integers(0, 2))):
        event["data"][draw(st.sampled_from(["order", "amount", "currency", "lines", "note"]))] = draw(JSON)
    if draw(st.integers(0, 9)) == 0:
        event["data"] = draw(JSON)
    if draw(st.integers(0, 19)) == 0:
        del event["data"]
        event["data_base64"] = "eHk="
    for name in draw(
        st.lists(st.sampled_from(["specversion", "id", "subject", "datacontenttype"]), max_size=1)
    ):
        event.pop(name, None)
    return event


def _same(fast: object, general: object) -> None:
    """The two outcomes are the same, to the order of the outgoing event's members."""
    assert type(fast) is type(general)
    if isinstance(fast, Outgoing) and isinstance(general, Outgoing):
        assert list(fast.event.items()) == list(general.event.items())
        assert repr(fast.event) == repr(general.event)  # the same types too (1, 1.0, true)
        assert fast.destination == general.destination
        assert fast.extras == general.extras
        assert fast.warnings == general.warnings
    else:
        assert fast == general


def _both(text: str, budget: Budget) -> tuple[Transformation, Transformation] | None:
    try:
        program = compile_cel(text, budget=budget)
    except ValueError:
        return None  # over the budget's static limits: refused when saved
    return Transformation(text, program, plan_of(program)), Transformation(text, program, None)


@settings(max_examples=1500, deadline=None)
@given(
    expressions(),
    events(),
    st.sampled_from(DESTINATIONS),
    st.booleans(),
    st.sampled_from([BUDGET.max_output_bytes, 60, 120, 200, 400]),
)
def test_the_fast_path_gives_what_the_general_path_gives(
    text: str, event: dict[str, Any], destination: Destination, batch: bool, limit: int
) -> None:
    both = _both(text, Budget(max_steps=BUDGET.max_steps, max_output_bytes=limit, max_depth=BUDGET.max_depth))
    if both is None:
        return
    shaped, general = both
    before = json.dumps(event)
    fast = transform(shaped, event, destination, batch=batch)
    _same(fast, transform(general, event, destination, batch=batch))
    assert json.dumps(event) == before  # the stored event is left as it was
    parts = prepare(shaped, event, destination, batch=batch)
    if isinstance(parts, tuple):  # what the dispatcher sends: the same event, the same place
        assert isinstance(fast, Outgoing)
        assert (list(parts[0].items()), parts[1], parts[2]) == (
            list(fast.event.items()),
            fast.destination,
            fast.extras,
        )
    else:
        assert parts == fast
    if shaped.plan is not None:
        made = shaped.plan.outgoing(event, destination, batch)
        if made is not None:  # whatever it gives is what the general path sends
            assert isinstance(fast, Outgoing)
            assert list(made[0].items()) == list(fast.event.items())


class OrdersWithoutTopic:
    """A registry's check: an order that has no ``topic`` differs from its definition."""

    def validate(self, event: Mapping[str, Any]) -> list[Violation]:
        if event.get("type") == "com.example.order" and "topic" not in event:
            return [Violation("/topic", "is required")]
        return []


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([TYPICAL, '{"type": event.type, "source": "/s", "n": event.data.order}']),
    events(),
    st.sampled_from([ValidationMode.WARN, ValidationMode.ENFORCE]),
)
def test_the_registrys_check_is_the_same_on_both_paths(
    text: str, event: dict[str, Any], mode: ValidationMode
) -> None:
    shaped = parse_transform({"cel": text})
    assert shaped.plan is not None
    check = output_check(OrdersWithoutTopic(), mode)
    general = dataclasses.replace(shaped, plan=None)
    _same(transform(shaped, event, HTTP, check=check), transform(general, event, HTTP, check=check))
    parts = prepare(shaped, event, HTTP, check=check)
    assert not isinstance(parts, tuple)  # with a check, always the record (it may carry warnings)


@settings(max_examples=300, deadline=None)
@given(events())
def test_the_typical_transformation_takes_the_fast_path(event: dict[str, Any]) -> None:
    """Every event the typical transformation turns into a valid one is done by the fast path;
    the others fail exactly as the general path makes them fail."""
    shaped = parse_transform({"cel": TYPICAL})
    assert shaped.plan is not None
    general = dataclasses.replace(shaped, plan=None)
    expected = transform(general, event, HTTP)
    _same(transform(shaped, event, HTTP), expected)
    made = shaped.plan.outgoing(event, HTTP, False)
    if isinstance(expected, Outgoing) and "data_base64" not in event and None not in expected.event.values():
        assert made is not None
    else:  # binary data, a null attribute (sent as absent) or a failure: the general path's
        assert made is None


def test_the_typical_transformation_on_the_order() -> None:
    shaped = parse_transform({"cel": TYPICAL})
    assert shaped.plan is not None
    outcome = transform(shaped, ORDER, HTTP)
    assert isinstance(outcome, Outgoing)
    assert list(outcome.event.items()) == [
        ("type", "com.example.order"),
        ("source", "/partner"),
        ("origin", "/shop"),
        ("topic", "orders/1"),
        ("datacontenttype", "application/json"),
        ("data", {"order": 1, "amount": 12.5, "currency": "EUR"}),
        ("specversion", "1.0"),
        ("id", "o-1"),
    ]
    assert outcome.destination is HTTP


def test_failures_keep_their_reason_and_position() -> None:
    shaped = parse_transform({"cel": TYPICAL})
    outcome = transform(shaped, {**ORDER, "data": {"order": 1}}, HTTP)
    assert isinstance(outcome, Failed)
    column = TYPICAL.index("event.data.amount") + len("event.data.") + 1  # the member's name
    assert outcome.message == f"transformation failed: no such key: 'amount' at line 1, column {column}"
    extension = transform(shaped, {**ORDER, "subject": 7}, HTTP)
    assert isinstance(extension, Outgoing)  # an integer is a fine extension (topic)
    assert extension.event["topic"] == 7
    assert transform(shaped, {**ORDER, "type": ""}, HTTP) == Failed(
        "the output is not a valid event: /type must not be empty"
    )
    assert transform(
        parse_transform({"cel": '{"source": "/s", "type": "t", "subject": event.data.order}'}), ORDER, HTTP
    ) == Failed("the output is not a valid event: /subject must be a string")


@settings(max_examples=3000, deadline=None)
@given(
    st.sampled_from(
        [
            "specversion",
            "id",
            "source",
            "type",
            "time",
            "subject",
            "datacontenttype",
            "dataschema",
            "replayid",
            "ext1",
        ]
    ),
    SCALARS | st.lists(SCALARS, max_size=1) | st.dictionaries(st.text(max_size=2), SCALARS, max_size=1),
)
def test_an_accepted_value_makes_no_problem(name: str, value: object) -> None:
    """``value_accepted`` never accepts what the full check refuses, and accepts every value the
    fast check of a whole event accepts (so the fast path is taken for ordinary events)."""
    assert name_accepted(name)
    event: dict[str, Any] = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t", name: value}
    if any_text_accepted(name) and type(value) is str:
        assert value_accepted(name, value)  # the fast path takes such strings without a call
    if value_accepted(name, value):
        assert event_problems(event) == []
    elif value is not None:
        assert event_problems(event) != []


def test_names_no_attribute_may_have() -> None:
    assert not any(
        name_accepted(name) for name in ("data", "data_base64", "Bad", "", "x" * 21, "$delivery", 1)
    )


def test_the_fast_path_knows_the_general_paths_reserved_names() -> None:
    assert shaped.OWNED == apply.OWNED
    assert shaped.DELIVERY == apply.DELIVERY_MEMBER

"""One event validity check: the fast path of ``event_problems`` never accepts an event the full
check refuses, so both give the same answer for every event (property test over generated
events, valid ones and near misses alike)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cebroker.pipeline import wellformed
from cebroker.pipeline.wellformed import event_problems

NAMES = st.sampled_from(
    [
        "specversion",
        "id",
        "source",
        "type",
        "time",
        "subject",
        "datacontenttype",
        "dataschema",
        "data",
        "data_base64",
        "ext1",
        "partitionkey",
        "Upper",
        "with-dash",
        "x" * 21,
        "",
    ]
) | st.text(alphabet="abcxyz019_-A", min_size=0, max_size=22)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**33), max_value=2**33),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        ["", "1.0", "0.3", "/s", "t", "2024-02-29T10:00:00Z", "2024-02-30T10:00:00Z", "aGk=", "%%"]
    ),
    st.text(max_size=8),
)
VALUES = SCALARS | st.lists(SCALARS, max_size=2) | st.dictionaries(st.text(max_size=3), SCALARS, max_size=2)


@st.composite
def events(draw: st.DrawFn) -> Any:
    """Mostly near-valid events: a valid core, then a few members added, changed or removed."""
    event: dict[str, Any] = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t"}
    for _ in range(draw(st.integers(0, 4))):
        event[draw(NAMES)] = draw(VALUES)
    for name in draw(st.lists(st.sampled_from(["specversion", "id", "source", "type"]), max_size=2)):
        event.pop(name, None)
    return draw(st.sampled_from([event, event, event, [event], "not an event"]))


@settings(max_examples=3000, deadline=None)
@given(events())
def test_fast_path_and_full_check_agree(event: Any) -> None:
    fast = wellformed._looks_valid(event)
    full = wellformed._problems(event, "")
    if fast:
        assert full == []
    assert event_problems(event) == full


def test_the_fast_path_is_taken_for_ordinary_events() -> None:
    """The property above would hold trivially if the fast path never said yes."""
    event = {
        "specversion": "1.0",
        "id": "1",
        "source": "/s",
        "type": "t",
        "time": "2024-02-29T10:00:00Z",
        "ext1": 7,
        "flag": True,
        "data": {"a": [1, 2]},
    }
    assert wellformed._looks_valid(event)

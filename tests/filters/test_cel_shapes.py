"""What the compiler records of an expression that writes its result out (``CelProgram.shape``), and the
member reads it compiles in one step (``event.data.order``): the same value or the same error as
the selections one by one, whatever the variables hold (a property test)."""

from __future__ import annotations

from typing import Any

import pytest
from cefilters.cel import CelEvaluationError, Computed, Constant, Frame, Path, Record, compile_cel
from hypothesis import given, settings
from hypothesis import strategies as st


def test_a_map_literal_of_members_and_constants_has_its_shape() -> None:
    program = compile_cel('{"type": event.type, "n": 1, "data": {"o": event.data["order"], "k": "x"}}')
    assert program.shape == Record(
        (
            ("type", Path("event", ("type",))),
            ("n", Constant(1)),
            ("data", Record((("o", Path("event", ("data", "order"))), ("k", Constant("x"))))),
        )
    )


@pytest.mark.parametrize(
    "text",
    [
        "event.type + 'x'",  # computed
        "[event][0].type",  # not a variable's member
        "[1].map(x, {'v': x})",  # a macro's variable
        "{event.type: 1}",  # a key that is not a constant
        "event[event.type]",
        "event.type == 'x' ? {'a': 1} : {'a': 2}",
    ],
)
def test_what_computes_has_no_shape(text: str) -> None:
    assert compile_cel(text).shape is None


def test_a_computed_member_is_run_by_its_closure() -> None:
    program = compile_cel('{"t": event.type + "x", "h": has(event.subject), "n": {"o": size(event.data)}}')
    assert isinstance(program.shape, Record)
    (t, computed), (h, present), (n, nested) = program.shape.members
    assert (t, h, n) == ("t", "h", "n")
    assert isinstance(computed, Computed)
    assert isinstance(present, Computed)
    assert isinstance(nested, Record)
    size = nested.members[0][1]
    assert isinstance(size, Computed)
    frame = Frame({"event": {"type": "a", "data": {"x": 1, "y": 2}}}, program.budget)
    assert computed.run(frame) == "ax"
    assert present.run(frame) is False
    assert size.run(frame) == 2


def test_a_folded_literal_is_a_constant() -> None:
    assert compile_cel('{"a": 1, "b": "x"}').shape == Constant({"a": 1, "b": "x"})


NAMES = st.sampled_from(["a", "b", "type", "data"])
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3), st.just(b"x"))
VALUES: st.SearchStrategy[Any] = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=10,
)


def _outcome(text: str, variables: dict[str, Any]) -> tuple[str, object]:
    try:
        return "value", compile_cel(text).evaluate(variables)
    except CelEvaluationError as error:
        return "error", error.reason


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(st.tuples(NAMES, st.booleans()), min_size=1, max_size=4),
    st.dictionaries(st.sampled_from(["event", "other"]), VALUES, max_size=2),
)
def test_a_member_read_in_one_step_is_the_selections_one_by_one(
    steps: list[tuple[str, bool]], variables: dict[str, Any]
) -> None:
    """``event.a["b"]`` against ``[event][0].a["b"]`` (no shape, so selected one by one)."""
    suffix = "".join(f'["{name}"]' if indexed else f".{name}" for name, indexed in steps)
    fused = compile_cel(f"event{suffix}")
    assert isinstance(fused.shape, Path)
    assert compile_cel(f"[event][0]{suffix}").shape is None
    assert _outcome(f"event{suffix}", variables) == _outcome(f"[event][0]{suffix}", variables)

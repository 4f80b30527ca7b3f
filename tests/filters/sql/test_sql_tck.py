"""The CloudEvents SQL v1 conformance suite (TCK), run verbatim: one test per case.

Each case checks the value (with its type) and the error kind. The YAML files are read twice:
once keeping every scalar as text, for ``expression`` (a bare ``TRUE`` or ``-10`` must reach the
parser as written), and once typed, for ``result`` and the events, with timestamps left as text
(a CloudEvents timestamp is a String in CESQL).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cefilters
import pytest
import yaml
from cefilters import FilterError, sql
from support.shared import CESQL_TCK

pytestmark = CESQL_TCK.needed  # every test here reads the TCK
TCK_CASE_COUNT = 275

# Used when a case gives no `event`: a valid event with every optional attribute set and a few
# extensions, none named like the cases' absent attributes (`missing`, `myext`, `x`).
DEFAULT_EVENT: dict[str, object] = {
    "specversion": "1.0",
    "id": "1234-abcd",
    "source": "/tck/source",
    "type": "io.cloudevents.tck",
    "datacontenttype": "application/json",
    "dataschema": "https://example.com/schema",
    "subject": "tck-subject",
    "time": "2021-01-01T00:00:00Z",
    "exbool": True,
    "exint": 42,
    "exstring": "extension",
}


@dataclass(frozen=True)
class Deviation:
    """A case whose expectation contradicts the spec: we assert the spec's answer instead."""

    tck_result: object
    tck_error: str | None
    result: object
    error: str | None
    reason: str


DEVIATIONS: dict[str, Deviation] = {
    "not_operator.yaml::Invalid int cast": Deviation(
        tck_result=True,
        tck_error="cast",
        result=False,
        error=None,
        reason=(
            "CESQL v1 §3.7 makes Integer -> Boolean a valid cast (0 is false, anything else true), "
            "so NOT 10 is NOT true = false without error; the TCK expects true with a cast error"
        ),
    ),
}


class _TextTimestampLoader(yaml.SafeLoader):
    """SafeLoader that leaves ISO timestamps as strings."""


_TextTimestampLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True)
class Case:
    file: str
    name: str
    expression: str
    event: dict[str, object]
    result: object
    error: str | None

    @property
    def id(self) -> str:
        return f"{self.file}::{self.name}"


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in CESQL_TCK.files("*.yaml"):
        text = path.read_text(encoding="utf-8")
        raw: Any = yaml.load(text, Loader=yaml.BaseLoader)  # every scalar as written
        typed: Any = yaml.load(text, Loader=_TextTimestampLoader)
        for raw_case, case in zip(raw["tests"], typed["tests"], strict=True):
            if "event" in case:
                event = dict(case["event"])
            else:
                event = {**DEFAULT_EVENT, **case.get("eventOverrides", {})}
            cases.append(
                Case(
                    file=path.name,
                    name=raw_case["name"],
                    expression=raw_case["expression"],
                    event=event,
                    result=case.get("result"),
                    error=case.get("error"),
                )
            )
    return cases


CASES = load_cases()


def test_the_whole_suite_is_present() -> None:
    """All 18 files and 275 cases of the TCK are found and run (a missing directory fails)."""
    assert len({case.file for case in CASES}) == 18
    assert len(CASES) == TCK_CASE_COUNT
    assert len({case.id for case in CASES}) == TCK_CASE_COUNT, "case ids must be unique"


def _same(actual: object, expected: object) -> bool:
    # 1 == True in Python: compare the types as well.
    return type(actual) is type(expected) and actual == expected


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_tck_case(case: Case) -> None:
    """CESQL v1 TCK case: value and error kind as the suite expects (or as the spec says, for
    a documented deviation)."""
    expected_result, expected_error = case.result, case.error
    deviation = DEVIATIONS.get(case.id)
    if deviation is not None:
        # The deviation must still be about what the TCK says, or it is stale.
        assert _same(case.result, deviation.tck_result)
        assert case.error == deviation.tck_error
        expected_result, expected_error = deviation.result, deviation.error

    if expected_error == "parse":
        with pytest.raises(sql.ParseError) as raised:
            sql.compile(case.expression)
        assert raised.value.kind == "parse"
        assert 0 <= raised.value.position <= len(case.expression)
        return

    result = sql.compile(case.expression).evaluate(case.event)
    assert [error.kind for error in result.errors] == ([expected_error] if expected_error else [])
    assert _same(result.value, expected_result), f"{result.value!r} != {expected_result!r}"


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_tck_case_as_a_subscription_filter(case: Case) -> None:
    """Subscriptions API sql dialect over the TCK: the filter {"sql": expression} is rejected
    at compile time exactly for the parse errors and the unknown functions (the dialect compiles
    with strict_functions, as a subscription that can never match is refused), and otherwise
    matches exactly when the expression yields the Boolean true without error."""
    expected_result, expected_error = case.result, case.error
    deviation = DEVIATIONS.get(case.id)
    if deviation is not None:
        expected_result, expected_error = deviation.result, deviation.error
    if expected_error in ("parse", "missingFunction"):
        with pytest.raises(FilterError) as raised:
            cefilters.compile([{"sql": case.expression}])
        assert raised.value.path == "/0/sql"
        return
    subscription = cefilters.compile([{"sql": case.expression}])
    assert subscription.matches(case.event) is (expected_result is True and expected_error is None)

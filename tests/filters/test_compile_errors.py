"""``cefilters.compile`` rejects every invalid filter with a JSON Pointer, and never drops one."""

from __future__ import annotations

import pickle
from typing import Any

import cefilters
import pytest
from cefilters.compiler import MAX_DEPTH


@pytest.mark.parametrize(
    ("filters", "path", "fragment"),
    [
        ({"exact": {"type": "a"}}, "", "array"),
        ("exact", "", "array"),
        ([{"nosuch": {"type": "a"}}], "/0/nosuch", "unsupported filter dialect"),
        ([{}], "/0", "exactly one dialect"),
        ([{"exact": {"type": "a"}, "prefix": {"type": "a"}}], "/0", "exactly one dialect"),
        (["exact"], "/0", "object"),
        ([{"exact": {}}], "/0/exact", "at least one attribute"),
        ([{"exact": ["type"]}], "/0/exact", "object"),
        ([{"exact": {"": "a"}}], "/0/exact/", "name must not be empty"),
        ([{"prefix": {"type": ""}}], "/0/prefix/type", "must not be an empty string"),
        ([{"suffix": {"type": 3}}], "/0/suffix/type", "must be a string"),
        ([{"exact": {"Type": "a"}}], "/0/exact/Type", "not a CloudEvents attribute name"),
        ([{"exact": {"my-ext": "a"}}], "/0/exact/my-ext", "not a CloudEvents attribute name"),
        ([{"exact": {"a/b~c": "a"}}], "/0/exact/a~1b~0c", "not a CloudEvents attribute name"),
        ([{"prefix": {"data": "a"}}], "/0/prefix/data", "payload"),
        ([{"all": []}], "/0/all", "at least one"),
        ([{"any": []}], "/0/any", "at least one"),
        ([{"all": {"exact": {"type": "a"}}}], "/0/all", "array"),
        ([{"any": "x"}], "/0/any", "array"),
        ([{"not": []}], "/0/not", "exactly one"),
        ([{"not": [{"exact": {"type": "a"}}]}], "/0/not", "exactly one"),
        ([{"not": {}}], "/0/not", "exactly one dialect"),
        ([{"not": None}], "/0/not", "object"),
        ([{"sql": 5}], "/0/sql", "string"),
        ([{"sql": None}], "/0/sql", "string"),
        ([{"cel": 5}], "/0/cel", "string"),
        ([{"cel": "type =="}], "/0/cel", "syntax error at line 1"),
        ([{"cel": "  "}], "/0/cel", "empty"),
        (
            [{"exact": {"type": "a"}}, {"all": [{"exact": {"type": "a"}}, {"sql": 1}]}],
            "/1/all/1/sql",
            "string",
        ),
        ([{"any": [{"not": {"exact": {"type": ""}}}]}], "/0/any/0/not/exact/type", "empty"),
    ],
)
def test_invalid_filters_are_rejected_with_their_path(filters: Any, path: str, fragment: str) -> None:
    """Subscriptions API, Filters: names and values MUST NOT be empty; all/any need at least one
    expression; not takes one; an unsupported dialect MUST be rejected."""
    with pytest.raises(cefilters.FilterError) as caught:
        cefilters.compile(filters)
    assert caught.value.path == path
    assert fragment in caught.value.message
    assert str(caught.value) == f"{path}: {caught.value.message}"
    assert isinstance(caught.value, ValueError)


def test_nesting_deeper_than_the_bound_is_a_filter_error_not_a_recursion_error() -> None:
    """Hostile input: depth is bounded with a clear FilterError."""
    expression: dict[str, object] = {"exact": {"type": "a"}}
    for _ in range(5000):
        expression = {"not": expression}
    with pytest.raises(cefilters.FilterError, match="nested more than"):
        cefilters.compile([expression])


def test_nesting_up_to_the_bound_compiles() -> None:
    """The bound rejects only what exceeds it: MAX_DEPTH levels of `not` still compile and work."""
    expression: dict[str, object] = {"exact": {"type": "a"}}
    for _ in range(MAX_DEPTH):
        expression = {"not": expression}
    compiled = cefilters.compile([expression])
    assert compiled.matches({"type": "a"}) is (MAX_DEPTH % 2 == 0)


def test_cel_expression_length_is_bounded() -> None:
    """The cel dialect bounds expression length."""
    with pytest.raises(cefilters.FilterError, match="longer than"):
        cefilters.compile([{"cel": "true && " * 1000 + "true"}])


def test_filter_error_survives_pickling() -> None:
    """Errors cross process boundaries (Spark executors) intact."""
    error = cefilters.FilterError("/0/sql", "bad")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cefilters.FilterError
    assert (copy.path, copy.message, str(copy)) == ("/0/sql", "bad", "/0/sql: bad")

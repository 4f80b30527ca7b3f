"""Unit tests: event validation rules, retry policy arithmetic and config parsing."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from cebroker.errors import ValidationError
from cebroker.pipeline.metrics import LATENCY_BUCKETS, LatencyHistogram
from cebroker.pipeline.policy import DeliveryPolicy, parse_policy
from cebroker.pipeline.wellformed import event_problems, normalize
from cebroker.spark.attributes import InvalidValue, check_rfc3339

GOOD = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t"}


@pytest.mark.parametrize(
    "time",
    ["2024-01-01T00:00:00Z", "2024-01-01t00:00:00.123456789z", "2024-02-29T23:59:60+05:30"],
)
def test_rfc3339_times_are_accepted(time: str) -> None:
    """CloudEvents core 3.1.1 Timestamp: RFC 3339 date-time."""
    assert event_problems({**GOOD, "time": time}) == []


@pytest.mark.parametrize(
    "time",
    [
        "2024-01-01",
        "2024-01-01 00:00:00Z",
        "2024-13-01T00:00:00Z",
        "2024-01-01T00:00:00",
        "2024-02-30T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2024-04-31T00:00:00Z",
    ],
)
def test_non_rfc3339_times_are_refused(time: str) -> None:
    """RFC 3339 5.6 full-date: the day must exist in its month (the Spark sink applies the
    same rule on its executors, so both refuse the same rows)."""
    assert [p.pointer for p in event_problems({**GOOD, "time": time})] == ["/time"]
    with pytest.raises(InvalidValue):
        check_rfc3339(time)


def test_attribute_names_and_extension_types() -> None:
    """Names are [a-z0-9]{1,20}; extension values are string, integer (32-bit) or boolean."""
    assert event_problems({**GOOD, "a" * 20: "x", "n": 5, "b": False}) == []
    bad = {**GOOD, "a" * 21: "x", "UPPER": 1, "f": 1.5, "o": {"x": 1}, "big": 2**40}
    pointers = sorted(p.pointer for p in event_problems(bad, "/2"))
    assert pointers == ["/2/UPPER", "/2/" + "a" * 21, "/2/big", "/2/f", "/2/o"]


def test_not_an_object_and_null_attributes() -> None:
    """A batch member that is not an object is named; null attributes mean absent."""
    assert [p.pointer for p in event_problems([1], "/0")] == ["/0"]
    assert event_problems({**GOOD, "subject": None}) == []
    assert normalize({**GOOD, "subject": None, "data": None}) == {**GOOD, "data": None}
    assert [p.pointer for p in event_problems({**GOOD, "data_base64": "***"})] == ["/data_base64"]


def test_exponential_backoff_with_jitter_is_capped() -> None:
    """Exponential: base doubles from initialdelay, capped at maxdelay, jittered within [d/2, d]."""
    policy = DeliveryPolicy(initialdelay=1.0, maxdelay=10.0)
    for attempts, full in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (50, 10.0)]:
        for _ in range(20):
            assert full / 2 <= policy.delay(attempts) <= full


def test_linear_backoff_and_retry_after_cap() -> None:
    policy = DeliveryPolicy(backoff="linear", initialdelay=2.0, maxdelay=7.0, retryaftermax=30.0)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [2.0, 4.0, 6.0, 7.0]
    assert policy.delay(1, retry_after=20.0) == 20.0
    assert policy.delay(1, retry_after=1000.0) == 30.0
    assert policy.delay(3, retry_after=1.0) == 6.0


def test_giving_up_by_attempts_or_ttl() -> None:
    policy = DeliveryPolicy(maxattempts=3, ttl=100.0)
    assert not policy.gives_up(2, next_at=50.0, first_at=0.0)
    assert policy.gives_up(3, next_at=50.0, first_at=0.0)
    assert policy.gives_up(1, next_at=101.0, first_at=0.0)
    assert not DeliveryPolicy().gives_up(10_000, next_at=3600.0, first_at=0.0)


def test_parse_policy_accepts_strings_and_names_bad_keys() -> None:
    """Config values may be strings (the API types them so); every bad key is named."""
    policy = parse_policy({"initialdelay": "0.5", "maxattempts": 4, "backoff": "LINEAR", "other": "x"})
    assert (policy.initialdelay, policy.maxattempts, policy.backoff) == (0.5, 4, "linear")
    with pytest.raises(ValidationError) as info:
        parse_policy(
            {
                "ttl": "-1",
                "concurrency": "1.5",
                "backoff": "random",
                "deadlettersink": "ftp://x",
                "timeout": True,
            }
        )
    assert sorted(p.pointer for p in info.value.problems) == [
        "/config/backoff",
        "/config/concurrency",
        "/config/deadlettersink",
        "/config/timeout",
        "/config/ttl",
    ]


def test_metric_labels_are_bounded() -> None:
    """Per-subscription labels up to a bound, then one shared ``_other`` series."""
    from cebroker.pipeline.metrics import MAX_LABELLED, OTHER, PipelineMetrics

    metrics = PipelineMetrics()
    labels = [metrics.label(f"s{i}") for i in range(MAX_LABELLED + 5)]
    assert labels[:MAX_LABELLED] == [f"s{i}" for i in range(MAX_LABELLED)]
    assert set(labels[MAX_LABELLED:]) == {OTHER}
    assert metrics.label("s0") == "s0"


def test_the_latency_histogram_is_exposed_as_the_library_histogram_exposes_one() -> None:
    """:class:`LatencyHistogram` gives the same ``_bucket``, ``_count`` and ``_sum`` lines as
    :class:`prometheus_client.Histogram` with the pipeline's bounds and the same observations
    (values on a bound, between bounds, below the first and above the last), label by label;
    only the library's ``_created`` line is not there."""
    library, ours = CollectorRegistry(), CollectorRegistry()
    bounds = LATENCY_BUCKETS
    reference = Histogram("x_seconds", "latency", ["subscription"], buckets=bounds, registry=library)
    latency = LatencyHistogram("x_seconds", "latency", bounds, ours)
    values = [0.0, 0.001, 0.0011, 0.5, 2.4, 2.5, 2.6, 60.0, 61.0]
    for label, observed in (("a", values), ("b", [1e-9])):
        for value in observed:
            reference.labels(label).observe(value)
            latency.labels(label).observe(value)
    expected = [line for line in generate_latest(library).decode().splitlines() if "_created" not in line]
    got = generate_latest(ours).decode().splitlines()
    assert got == expected
    assert 'x_seconds_bucket{le="0.5",subscription="a"} 4.0' in got
    assert 'x_seconds_bucket{le="60.0",subscription="a"} 8.0' in got
    assert 'x_seconds_count{subscription="a"} 9.0' in got
    with pytest.raises(ValueError, match="increasing"):
        LatencyHistogram("y_seconds", "latency", (0.5, 0.1), CollectorRegistry())

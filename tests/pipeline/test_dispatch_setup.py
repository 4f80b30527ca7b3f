"""Unit tests of the dispatch parts that own a subscription's delivery setup and the loader's
agenda: :mod:`cebroker.pipeline.dispatch.setup` and :mod:`cebroker.pipeline.dispatch.due`."""

from __future__ import annotations

import base64
import dataclasses

from cebroker.pipeline.dispatch.due import DueTimes
from cebroker.pipeline.dispatch.lane import BATCHES_HELD, Lane
from cebroker.pipeline.dispatch.setup import DeliverySetups
from cebroker.storage.deliveries import HELD_AT
from cebroker.subscription import RetiredSecret, Subscription
from pipeline.clocks import ManualClock


def _secret(fill: bytes) -> str:
    return "whsec_" + base64.b64encode(fill * 32).decode()


def _subscription(**config: object) -> Subscription:
    return Subscription(id="s", protocol="HTTP", sink="http://127.0.0.1:9/", config=dict(config))


def test_a_setup_is_made_once_per_revision() -> None:
    setups = DeliverySetups(ManualClock())
    first = _subscription(timeout="3")
    setup = setups.of(first)
    assert setups.of(first) is setup  # the same revision: the same setup
    assert (setup.policy.timeout, setup.destination.timeout) == (3.0, 3.0)
    second = dataclasses.replace(first, config={"timeout": "7"})
    assert setups.of(second).destination.timeout == 7.0  # a new revision: made again
    setups.forget("s")
    assert setups.of(second) is not setups.of(first)


def test_a_setup_is_made_again_when_a_retired_secret_stops_signing() -> None:
    clock = ManualClock()
    setups = DeliverySetups(clock)
    subscription = dataclasses.replace(
        _subscription(),
        webhook_secret=_secret(b"a"),
        retired_secrets=(RetiredSecret(_secret(b"b"), clock.now() + 10),),
    )
    during = setups.of(subscription)
    assert during.destination.webhook is not None
    assert len(during.destination.webhook.secrets) == 2
    clock.advance(5)
    assert setups.of(subscription) is during  # the overlap goes on
    clock.advance(6)
    after = setups.of(subscription)
    assert after is not during
    assert after.destination.webhook is not None
    assert len(after.destination.webhook.secrets) == 1


def test_a_lane_follows_its_setup_batches_and_rate_limit() -> None:
    clock = ManualClock()
    setups = DeliverySetups(clock)
    batching = dataclasses.replace(
        _subscription(maxbatchsize="100", concurrency="2", ratelimit="5"),
        protocolsettings={"contentmode": "batch"},
    )
    lane = Lane("s", 16, clock)
    lane.follow(setups.of(batching))
    assert lane.batch is not None
    assert lane.batch.events == 100
    assert lane.capacity == min(2, BATCHES_HELD) * 100
    bucket = lane.limiter
    assert bucket is not None
    assert bucket.rate == 5.0
    same_rate = dataclasses.replace(batching, config={"ratelimit": "5", "concurrency": "1"})
    lane.follow(setups.of(same_rate))
    assert lane.limiter is bucket  # the same rate keeps its bucket (and its tokens)
    assert lane.batch is not None
    assert lane.capacity == 1 * lane.batch.events  # the new revision's concurrency
    plain = dataclasses.replace(same_rate, config={}, protocolsettings={})
    lane.follow(setups.of(plain))
    assert lane.batch is None
    assert lane.limiter is None
    assert lane.capacity == 16


def test_the_due_times_keep_what_was_scheduled_while_the_loader_read() -> None:
    due = DueTimes({"s": _subscription()})
    due.schedule("s", 50.0)
    due.schedule("s", 20.0)  # the earliest counts
    assert due.items() == [("s", 20.0)]
    assert due.wakeup.is_set()
    due.schedule("s", 10.0)  # a retry falls due earlier while the loader reads
    due.loaded("s", 20.0, later=None)
    assert due.items() == [("s", 10.0)]  # kept: the loader read only what was due at 20
    due.loaded("s", 10.0, later=30.0)
    assert due.items() == [("s", 30.0)]
    due.loaded("s", 30.0, later=None)
    assert not due.waiting("s")


def test_the_due_times_never_hold_a_pull_subscription_and_say_when_groups_wait() -> None:
    pull = dataclasses.replace(_subscription(), id="p", protocol="PULL", sink="")
    due = DueTimes({"s": _subscription(), "p": pull})
    due.schedule("p", 0.0)
    assert not due.waiting("p")  # its consumers receive it: never loaded
    due.schedule("s", HELD_AT)
    assert due.held_back("s")
    due.schedule("s", 0.0)
    assert not due.held_back("s")
    due.forget("s")
    assert due.items() == []

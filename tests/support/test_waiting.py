"""The waiting helpers: what they return, and what their failure says."""

from __future__ import annotations

import itertools

import pytest

from support.waiting import async_wait_for, async_wait_until, wait_for, wait_until


def test_wait_until_returns_the_first_truthy_result() -> None:
    counter = itertools.count()
    assert wait_until(lambda: next(counter) >= 3 and "done", timeout=5, interval=0) == "done"


def test_wait_for_returns_the_accepted_observation() -> None:
    counter = itertools.count()
    assert wait_for(lambda: next(counter), lambda n: n == 4, timeout=5, interval=0) == 4


def test_a_timeout_names_what_was_awaited_and_the_last_value() -> None:
    with pytest.raises(AssertionError) as failure:
        wait_for(lambda: {"delivered": 2}, lambda s: s["delivered"] == 3, 0.05, "three deliveries")
    assert str(failure.value) == (
        "gave up after 0.05 s waiting for three deliveries; last observed: {'delivered': 2}"
    )


def test_without_a_message_the_failure_shows_the_condition() -> None:
    with pytest.raises(AssertionError, match=r"waiting for .*lambda: 1 > 2.*last observed: False"):
        wait_until(lambda: 1 > 2, 0.05)


def test_a_long_last_value_is_cut() -> None:
    with pytest.raises(AssertionError, match=r"\.\.\. \(10002 characters\)$"):
        wait_for(lambda: "x" * 10_000, lambda _: False, 0.05, "nothing")


async def test_async_variants_take_coroutines_and_plain_functions() -> None:
    counter = itertools.count()

    async def grows() -> int:
        return next(counter)

    assert await async_wait_for(grows, lambda n: n == 2, within=5, interval=0) == 2
    assert await async_wait_until(grows, within=5, interval=0) == 3
    assert await async_wait_until(lambda: "plain", within=5) == "plain"
    assert await async_wait_for(lambda: "plain", lambda text: text == "plain", within=5) == "plain"
    with pytest.raises(AssertionError, match="waiting for never; last observed: 0"):
        await async_wait_until(lambda: 0, within=0.05, message="never")

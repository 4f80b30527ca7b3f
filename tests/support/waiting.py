"""Waiting for something another thread, task or process does: the one polling loop of the tests.

:func:`wait_until` polls a condition until it holds or a deadline passes; :func:`wait_for`
polls an observation until it is acceptable. Both return what satisfied them. On timeout they
fail with an ``AssertionError`` that says what was awaited and the last value observed, so that
a red test explains itself. :func:`async_wait_until` and :func:`async_wait_for` do the same from
a coroutine, without blocking the event loop (their timeout is named ``within``).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast, overload

T = TypeVar("T")

#: Default time to wait, in seconds.
TIMEOUT = 15.0
#: Pause between two looks, in seconds.
INTERVAL = 0.05


def _truthy(value: object) -> bool:
    return bool(value)


def describe(condition: Callable[..., object]) -> str:
    """What ``condition`` checks, for a failure message: a lambda's source line when it can be
    read, else the function's name."""
    name = getattr(condition, "__qualname__", repr(condition))
    if getattr(condition, "__name__", "") != "<lambda>":
        return name
    try:
        return " ".join(inspect.getsource(condition).split())
    except (OSError, TypeError):
        return name


#: Longest text of the last observed value a failure shows.
SHOWN = 2000


def _failure(awaited: str, timeout: float, last: object) -> AssertionError:
    shown = repr(last)
    if len(shown) > SHOWN:
        shown = f"{shown[:SHOWN]}... ({len(shown)} characters)"
    return AssertionError(f"gave up after {timeout:g} s waiting for {awaited}; last observed: {shown}")


def wait_for(
    observe: Callable[[], T],
    accept: Callable[[T], bool],
    timeout: float = TIMEOUT,
    message: str | None = None,
    *,
    interval: float = INTERVAL,
) -> T:
    """Poll ``observe`` until ``accept`` takes its value; returns that value.

    Args:
        observe: reads the current state (a status document, a list of requests...).
        accept: whether that state is the one awaited.
        timeout: seconds before giving up.
        message: what is awaited, for the failure (by default the source of ``accept``).
        interval: seconds between two looks.

    Raises:
        AssertionError: the deadline passed; names what was awaited and the last observation.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = observe()
        if accept(value):
            return value
        if time.monotonic() >= deadline:
            raise _failure(message or describe(accept), timeout, value)
        time.sleep(interval)


def wait_until(
    condition: Callable[[], T],
    timeout: float = TIMEOUT,
    message: str | None = None,
    *,
    interval: float = INTERVAL,
) -> T:
    """Poll ``condition`` until it returns something truthy, and return that.

    Args:
        condition: checks the state; a truthy result ends the wait.
        timeout: seconds before giving up.
        message: what is awaited, for the failure (by default the source of ``condition``).
        interval: seconds between two looks.

    Raises:
        AssertionError: the deadline passed; names what was awaited and the last result.
    """
    return wait_for(condition, _truthy, timeout, message or describe(condition), interval=interval)


async def _look(observe: Callable[[], object]) -> object:
    result = observe()
    return await result if inspect.isawaitable(result) else result


@overload
async def async_wait_for(
    observe: Callable[[], Awaitable[T]],
    accept: Callable[[T], bool],
    within: float = TIMEOUT,
    message: str | None = None,
    *,
    interval: float = INTERVAL,
) -> T: ...


@overload
async def async_wait_for(
    observe: Callable[[], T],
    accept: Callable[[T], bool],
    within: float = TIMEOUT,
    message: str | None = None,
    *,
    interval: float = INTERVAL,
) -> T: ...


async def async_wait_for(
    observe: Callable[[], Awaitable[T]] | Callable[[], T],
    accept: Callable[[T], bool],
    within: float = TIMEOUT,
    message: str | None = None,
    *,
    interval: float = INTERVAL,
) -> T:
    """:func:`wait_for` from a coroutine, sleeping without blocking the loop; ``observe`` may be a
    coroutine function (awaited at each look) or a plain function (an in-memory read);
    ``within`` is the timeout in seconds."""
    deadline = time.monotonic() + within
    while True:
        # The overloads tie what observe gives to what accept takes.
        value = cast(T, await _look(observe))
        if accept(value):
            return value
        if time.monotonic() >= deadline:
            raise _failure(message or describe(accept), within, value)
        await asyncio.sleep(interval)


@overload
async def async_wait_until(
    condition: Callable[[], Awaitable[T]],
    within: float = TIMEOUT,
    message: str | None = None,
    *,
    interval: float = INTERVAL,
) -> T: ...


@overload
async def async_wait_until(
    condition: Callable[[], T],
    within: float = TIMEOUT,
    message: str | None = None,
    *,
    interval: float = INTERVAL,
) -> T: ...


async def async_wait_until(
    condition: Callable[[], Awaitable[T]] | Callable[[], T],
    within: float = TIMEOUT,
    message: str | None = None,
    *,
    interval: float = INTERVAL,
) -> T:
    """:func:`wait_until` from a coroutine; ``condition`` may be a coroutine function (awaited at
    each look) or a plain function (an in-memory check); ``within`` is the timeout in seconds."""
    return await async_wait_for(condition, _truthy, within, message or describe(condition), interval=interval)

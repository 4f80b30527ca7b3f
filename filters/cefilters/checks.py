"""The result types of the explain path: why a subscription did or did not accept an event.

Every compiled filter has ``explain(event, pointer)`` next to ``matches(event)``, built from the
same compiled data (the same comparison, the same CloudEvents SQL closures, the same CEL program),
so the verdict it reports is the one ``matches`` gives. It answers a list of :class:`Check`: the
filter's own first, then those of the expressions nested in it, in document order, each located by
a JSON Pointer into the subscription (``/filters/1/all/0``). ``SubscriptionIndex.explain`` puts
them together into an :class:`Explanation`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # base imports this module for MatchAll
    from .base import Event

__all__ = ["Check", "Explainable", "Explanation"]


@dataclass(frozen=True, slots=True)
class Check:
    """The outcome of one condition of a subscription for one event.

    Attributes:
        pointer: RFC 6901 JSON Pointer of the condition in the subscription: ``/source``,
            ``/types``, ``/filters/0``, ``/filters/1/all/0``, ``/filters/2/not``, or an attribute
            of a multi-attribute filter, ``/filters/0/exact/subject``.
        matched: whether the condition holds for the event.
        detail: why, in words (``prefix of subject: 'eu/' does not start 'us/42'``).
    """

    pointer: str
    matched: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Explanation:
    """Whether a subscription accepts an event, and the outcome of each of its conditions.

    Attributes:
        matched: the verdict; equals ``key in index.match(event)`` for an indexed subscription.
        checks: every condition in document order: ``/source``, ``/types``, then the filters,
            each expression followed by the expressions nested in it.
    """

    matched: bool
    checks: tuple[Check, ...]


@runtime_checkable
class Explainable(Protocol):
    """A compiled filter that can say why it matched: every filter of this library is one."""

    def matches(self, event: Event) -> bool:
        """Whether ``event`` passes this filter."""
        ...

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """This filter's :class:`Check` (first) and those of its nested expressions.

        ``pointer`` locates the filter in the subscription; nested checks extend it. The first
        check's ``matched`` is always what ``matches(event)`` returns. Never raises.
        """
        ...

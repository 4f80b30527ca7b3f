"""``SubscriptionIndex``: which subscriptions does an event match, at a cost set by the event.

Each subscription is registered under the anchors of its plan (:mod:`.plan`) in per-attribute
tables (:mod:`.tables`). Matching walks the event's own attributes: one hash lookup per indexed
attribute for ``exact`` and a few for ``prefix`` and ``suffix`` (see :mod:`.tables`); only the
candidates found there have their residual filter (``not``, ``sql``, ``cel``, further attributes)
evaluated. Subscriptions with nothing indexable are checked on every event (``unanchored``), so
their number is the one linear term left.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Generic, TypeVar

from ..base import Event, Filter, canonical_string
from ..checks import Explanation
from ..compiler import compile
from ..errors import FilterError
from ..observer import BudgetObserver
from .plan import Anchor, Plan, plan
from .tables import AttributeTable

__all__ = ["SubscriptionIndex"]

K = TypeVar("K", bound=Hashable)


class SubscriptionIndex(Generic[K]):
    """Subscriptions by key, answering ``match(event) -> set of keys`` in sublinear time.

    ``match`` returns exactly the keys whose subscription accepts the event: its ``filters`` match,
    the event's ``source`` equals ``source`` (if given) and its ``type`` is in ``types`` (if given;
    an empty list admits no type). The index is not thread-safe: guard it with a lock if one thread
    adds while another matches.
    """

    __slots__ = ("_observer", "_always_check", "_always_sure", "_plans", "_residuals", "_tables")

    def __init__(self, *, observer: BudgetObserver | None = None) -> None:
        """``observer`` is told of every evaluation of an expression over its budget."""
        self._observer = observer
        self._tables: dict[str, AttributeTable[K]] = {}
        self._plans: dict[K, Plan] = {}
        self._residuals: dict[K, Filter] = {}  # every key that has a residual
        self._always_check: dict[K, Filter] = {}  # no anchor: residual checked on every event
        self._always_sure: set[K] = set()  # no anchor and no residual: matches every event

    def add(
        self,
        key: K,
        filters: Sequence[Mapping[str, object]] | Filter,
        *,
        source: str | None = None,
        types: Sequence[str] | None = None,
    ) -> None:
        """Index a subscription; an existing ``key`` is replaced.

        Args:
            key: the subscription's identity (any hashable, usually its id).
            filters: a Subscriptions API ``filters`` array, or a filter already compiled with
                :func:`cefilters.compile`.
            source: the subscription's ``source`` constraint (exact match on the event's ``source``).
            types: the subscription's ``types`` constraint (the event's ``type`` must be listed).

        Raises:
            FilterError: ``filters`` is invalid; the index is left unchanged.
            TypeError: ``source`` or ``types`` has the wrong type; the index is left unchanged.
        """
        if source is not None and not isinstance(source, str):
            raise TypeError("source must be a string or None")
        if types is not None and (isinstance(types, str) or not all(isinstance(t, str) for t in types)):
            raise TypeError("types must be a sequence of strings or None")
        chosen = plan(_as_filter(filters, self._observer), source, types, self._bucket_size)
        self.remove(key)  # everything that can fail is done: replace the old version, if any
        self._plans[key] = chosen
        if chosen.never:
            return
        sure = chosen.residual is None
        if chosen.residual is not None:
            self._residuals[key] = chosen.residual
        if not chosen.anchors:
            if chosen.residual is None:
                self._always_sure.add(key)
            else:
                self._always_check[key] = chosen.residual
        for kind, name, value in chosen.anchors:
            table = self._tables.get(name)
            if table is None:
                self._tables[name] = table = AttributeTable()
            table.side(kind).add(value, key, sure)

    def remove(self, key: K) -> None:
        """Forget a subscription; an unknown key is ignored."""
        chosen = self._plans.pop(key, None)
        if chosen is None:
            return
        self._residuals.pop(key, None)
        self._always_check.pop(key, None)
        self._always_sure.discard(key)
        sure = chosen.residual is None
        for kind, name, value in chosen.anchors:
            table = self._tables[name]
            table.side(kind).remove(value, key, sure)
            if not table:
                del self._tables[name]

    def match(self, event: Event) -> set[K]:
        """The keys of every subscription that accepts ``event``; never raises for odd values."""
        matched = set(self._always_sure)
        candidates: list[set[K]] = []
        tables = self._tables
        for name, value in event.items():
            table = tables.get(name)
            if table is None:
                continue
            if type(value) is not str:
                value = canonical_string(value)
                if value is None:
                    continue
            table.collect(value, matched, candidates)
        residuals = self._residuals
        for keys in candidates:
            for key in keys:
                if key not in matched and residuals[key].matches(event):
                    matched.add(key)
        for key, residual in self._always_check.items():
            if residual.matches(event):
                matched.add(key)
        return matched

    def explain(self, key: K, event: Event) -> Explanation:
        """Why the subscription ``key`` accepts ``event`` or not, condition by condition.

        Covers ``source`` (pointer ``/source``), ``types`` (``/types``) and every filter
        expression (``/filters/0``, ``/filters/1/all/0``, ...; a multi-attribute filter also
        reports each attribute, ``/filters/0/exact/subject``). Every condition is evaluated, even
        after one has failed, through the same compiled filters ``match`` uses, and ``matched``
        always equals ``key in self.match(event)``. Never raises because of the event's values.

        Raises:
            KeyError: ``key`` is not indexed.
        """
        return self._plans[key].explain(event)

    @property
    def unanchored(self) -> int:
        """How many subscriptions have no indexable condition and are evaluated for every event.

        The one cost of ``match`` that grows with the number of subscriptions; worth watching.
        """
        return len(self._always_check)

    def __len__(self) -> int:
        return len(self._plans)

    def __contains__(self, key: object) -> bool:
        return key in self._plans

    def _bucket_size(self, anchor: Anchor) -> float:
        """How many keys are already stored under ``anchor`` (plus one): the planner's cost."""
        kind, name, value = anchor
        table = self._tables.get(name)
        if table is None:
            return 1.0
        return 1.0 + table.side(kind).size(value)


def _as_filter(filters: Sequence[Mapping[str, object]] | Filter, observer: BudgetObserver | None) -> Filter:
    """Compile a filters array; pass a compiled filter through.

    Checks for an array first: ``isinstance`` against the runtime-checkable ``Filter`` protocol
    costs several microseconds, a noticeable share of ``add``.
    """
    if isinstance(filters, Sequence):
        return compile(filters, observer=observer)
    if not callable(getattr(filters, "matches", None)):
        raise FilterError("", "filters must be an array of filter expressions")
    return filters

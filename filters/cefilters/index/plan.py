"""How a subscription is split into an indexable anchor and a residual filter.

A subscription's constraints (``source``, ``types`` and the top-level ``filters``, an implicit
``all``) are flattened into a conjunction. For each conjunct we derive *anchors*: attribute
predicates (``exact``/``prefix``/``suffix`` on one attribute) such that the conjunct can only hold
when at least one anchor holds. ``all`` contributes its best child's anchors, ``any`` the union of
every branch's (only if each branch has some), ``sql`` those of the attribute conditions its
expression implies (:mod:`.sql_implied`). ``not`` and ``cel`` have none.

The index stores the subscription under the anchors of its best conjunct, so an event reaches it
only through a hash lookup that proves an anchor true. When the anchors are also *sufficient* (the
conjunct holds whenever one does, e.g. a single-attribute ``exact``, or ``types``) that conjunct is
dropped from the residual; a subscription with an empty residual is matched by the lookup alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from ..base import Event, Filter, MatchAll
from ..checks import Explanation
from ..dialects.exact import ExactFilter
from ..dialects.logical import AllFilter, AnyFilter
from ..dialects.prefix import PrefixFilter
from ..dialects.sql import SqlFilter
from ..dialects.suffix import SuffixFilter
from .conditions import TypesFilter, explain_conditions
from .sql_implied import implied_filter

__all__ = ["Anchor", "Kind", "Plan", "TypesFilter", "plan"]

Kind = Literal["exact", "prefix", "suffix"]
Anchor = tuple[Kind, str, str]
"""``(kind, attribute, value)``: the attribute's canonical string equals / starts with / ends with value."""

Cost = Callable[[Anchor], float]
"""How many subscriptions already share an anchor, plus one (the index passes its bucket sizes).

See :func:`_score` for how the planner uses it."""

_AFFIX_BREADTH: Final = 64.0
"""How much broader than an ``exact`` value a one-character prefix or suffix is assumed to be."""


def _score(anchor: Anchor, cost: Cost) -> float:
    """How many events an anchor is expected to let through; the planner picks the lowest.

    What a subscription costs under an anchor is how often the anchor fires times its residual,
    so the score estimates how common the anchor is among events, from two hints. Breadth:
    prefixes and suffixes are broader than values, and short ones much broader (``region`` matches
    nearly every subject): ``2 + 64 / length`` against ``1`` for ``exact``. Popularity: a value
    many subscriptions share (``specversion = 1.0``, a popular type) is probably common in events,
    counted logarithmically so that it refines rather than overrides breadth. A heuristic: it only
    steers the choice, never the result.
    """
    kind, _, value = anchor
    breadth = 1.0 if kind == "exact" else 2.0 + _AFFIX_BREADTH / max(1, len(value))
    return breadth * (1.0 + math.log2(cost(anchor)))


@dataclass(frozen=True, slots=True)
class Plan:
    """Where a subscription is stored and what remains to check.

    Attributes:
        anchors: the predicates it is registered under; empty means "check on every event".
        residual: what a candidate must still pass, or ``None`` when reaching it proves a match.
        filter: the compiled ``filters`` as given, for ``explain``.
        source: the ``source`` constraint, for ``explain``.
        types: the ``types`` constraint, for ``explain``.
        never: the subscription can match no event (``types`` is an empty list); store nothing.
    """

    anchors: tuple[Anchor, ...]
    residual: Filter | None
    filter: Filter
    source: str | None
    types: TypesFilter | None
    never: bool = False

    def explain(self, event: Event) -> Explanation:
        """The subscription's conditions as written, checked against ``event``."""
        return explain_conditions(self.filter, self.source, self.types, event)


@dataclass(frozen=True, slots=True)
class _Anchors:
    anchors: tuple[Anchor, ...]
    sufficient: bool  # the filter holds whenever one of the anchors holds
    cost: float


def plan(filter_: Filter, source: str | None, types: Sequence[str] | None, cost: Cost) -> Plan:
    """Choose the anchors and residual for one subscription (see the module docstring)."""
    types_filter = None if types is None else TypesFilter(types)
    if types is not None and not types:
        return Plan((), None, filter_, source, types_filter, never=True)
    conjuncts: list[Filter] = []
    if source is not None:
        conjuncts.append(ExactFilter((("source", source),)))
    if types_filter is not None:
        conjuncts.append(types_filter)
    _flatten(filter_, conjuncts)
    best: tuple[int, _Anchors] | None = None
    for position, conjunct in enumerate(conjuncts):
        found = _anchors(conjunct, cost)
        if found is not None and (best is None or found.cost < best[1].cost):
            best = (position, found)
    if best is None:
        return Plan((), _conjunction(conjuncts), filter_, source, types_filter)
    position, chosen = best
    rest = conjuncts[:position] + conjuncts[position + 1 :] if chosen.sufficient else conjuncts
    return Plan(chosen.anchors, _conjunction(rest), filter_, source, types_filter)


def _flatten(filter_: Filter, into: list[Filter]) -> None:
    """Append the conjuncts of ``filter_``; multi-attribute filters become one per attribute."""
    if isinstance(filter_, MatchAll):
        return
    if isinstance(filter_, AllFilter):
        for child in filter_.children:
            _flatten(child, into)
    elif isinstance(filter_, ExactFilter | PrefixFilter | SuffixFilter) and len(filter_.pairs) > 1:
        into.extend(type(filter_)((pair,)) for pair in filter_.pairs)
    else:
        into.append(filter_)


def _conjunction(conjuncts: list[Filter]) -> Filter | None:
    if not conjuncts:
        return None
    return conjuncts[0] if len(conjuncts) == 1 else AllFilter(tuple(conjuncts))


def _anchors(filter_: Filter, cost: Cost) -> _Anchors | None:
    """The cheapest anchor set implied by ``filter_``, or ``None`` if it implies none."""
    if isinstance(filter_, TypesFilter):
        anchors: tuple[Anchor, ...] = tuple(("exact", "type", t) for t in sorted(filter_.types))
        return _Anchors(anchors, True, sum(_score(a, cost) for a in anchors)) if anchors else None
    if isinstance(filter_, ExactFilter | PrefixFilter | SuffixFilter):
        kind: Kind = (
            "exact"
            if isinstance(filter_, ExactFilter)
            else "prefix"
            if isinstance(filter_, PrefixFilter)
            else "suffix"
        )
        # An empty prefix or suffix (only possible in a hand-built filter) selects nothing.
        options: list[Anchor] = [(kind, n, v) for n, v in filter_.pairs if v or kind == "exact"]
        if not options:
            return None
        best_cost, anchor = min((_score(a, cost), a) for a in options)
        return _Anchors((anchor,), len(filter_.pairs) == 1, best_cost)
    if isinstance(filter_, AllFilter):
        found = [a for a in (_anchors(child, cost) for child in filter_.children) if a is not None]
        if not found:
            return None
        best = min(found, key=lambda a: a.cost)
        return _Anchors(best.anchors, best.sufficient and len(filter_.children) == 1, best.cost)
    if isinstance(filter_, SqlFilter):
        implied = implied_filter(filter_.text)
        derived = None if implied is None else _anchors(implied, cost)
        return None if derived is None else _Anchors(derived.anchors, False, derived.cost)
    if isinstance(filter_, AnyFilter):
        branches = [_anchors(child, cost) for child in filter_.children]
        if any(b is None for b in branches):
            return None
        present = [b for b in branches if b is not None]
        return _Anchors(
            tuple(dict.fromkeys(a for b in present for a in b.anchors)),  # distinct, in order
            all(b.sufficient for b in present),
            sum(b.cost for b in present),
        )
    return None

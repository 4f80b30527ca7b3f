"""A subscription's ``config`` as a typed value: :class:`DeliverySettings`.

The one reader of ``config``: :func:`parse_delivery_settings` checks it and says what is wrong
with a JSON Pointer for every bad member (the Subscriptions API refuses the subscription with
those problems); :func:`stored_delivery_settings` is what every realized
:class:`~cebroker.subscription.Subscription` holds as ``delivery``, so that the pipeline reads
typed values and never parses ``config`` again. The defaults live here, on the dataclass, and
nowhere else. ``config`` itself stays as the client gave it (the wire form); members no part
reads are kept there as given.

Keys (values may be JSON numbers or numeric strings, since the Subscriptions API types
``config`` values as strings):

=================  ===========  ===============================================================
key                default      meaning
=================  ===========  ===============================================================
``maxattempts``    ``0``        give up after this many attempts (``0``: only ``ttl`` limits)
``backoff``        exponential  ``exponential`` (doubling, with jitter) or ``linear``
``initialdelay``   ``1``        seconds before the first retry
``maxdelay``       ``300``      longest wait between attempts, seconds
``ttl``            ``86400``    give up this many seconds after the event was accepted
``retryaftermax``  ``300``      cap on a sink's ``Retry-After``, seconds
``timeout``        ``10``       seconds to wait for the sink's answer per attempt
``concurrency``    ``8``        deliveries in flight at once for this subscription (at most
                                :data:`MAX_CONCURRENCY`)
``ratelimit``      none         deliveries per second for this subscription
``deadlettersink`` none         HTTP URL that receives a copy of every dead-lettered event
``probemaxdelay``  the broker's longest wait between two probes of a sink whose circuit is open,
                   setting      seconds (``--probe-max-delay``, 10 s by default)
``ordering``       ``none``     ``partitionkey``: events with the same ``partitionkey`` extension
                                are delivered one after the other, in acceptance order
``maxbatchsize``   ``100``      HTTP ``contentmode: batch``: events per request, at most
``maxbatchbytes``  ``1048576``  ... and bytes of their JSON per request, at most (a batch holds
                                one event at least)
``maxbatchdelay``  ``0.1``      ... and seconds to wait for a batch to fill
``startfrom``      ``now``      ``earliest`` or an RFC 3339 time: on creation, deliver the
                                archived events accepted since then (pipeline/replays)
``reply``          ``off``      ``publish``: the sink's CloudEvent answer is published as a new
                                event (pipeline/dispatch/replies.py)
=================  ===========  ===============================================================

``transform`` is read by the pipeline's transformations, which compile it once per revision.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ceprotocols.eventform import is_timestamp

from cebroker.errors import FieldProblem, ValidationError

log = logging.getLogger("cebroker.subscriptions")

BACKOFFS = ("exponential", "linear")
#: The largest ``concurrency``: each delivery in flight holds a connection (or a sender slot)
#: of its own, and a subscription's sink may hang every one of them until its ``timeout``.
MAX_CONCURRENCY = 256
ORDERINGS = ("none", "partitionkey")
#: Values of ``reply``: ``publish`` turns replies on.
REPLY_MODES = ("publish", "off")
#: Bounds of the batch settings.
MAX_BATCH_EVENTS = 10_000
MAX_BATCH_DELAY = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliverySettings:
    """How one subscription's deliveries are paced, retried, ordered, batched and given up on,
    where it starts and whether it publishes its sink's replies: its ``config``, typed.

    Every default of a ``config`` member is the default of its field here.
    """

    maxattempts: int = 0
    backoff: str = "exponential"
    initialdelay: float = 1.0
    maxdelay: float = 300.0
    ttl: float = 86400.0
    retryaftermax: float = 300.0
    timeout: float = 10.0
    concurrency: int = 8
    ratelimit: float | None = None
    deadlettersink: str | None = None
    #: None: the broker's ``--probe-max-delay``.
    probemaxdelay: float | None = None
    #: ``ordering: partitionkey``.
    ordering: bool = False
    maxbatchsize: int = 100
    maxbatchbytes: int = 1024 * 1024
    maxbatchdelay: float = 0.1
    #: Where a replay of the archive starts on creation, in epoch seconds (0: ``earliest``);
    #: None: ``now``, no replay.
    startfrom: float | None = None
    #: ``reply: publish``.
    reply: bool = False

    def delay(
        self,
        attempts: int,
        retry_after: float | None = None,
        uniform: Callable[[float, float], float] = random.uniform,
    ) -> float:
        """Seconds to wait after the ``attempts``-th failed attempt.

        Exponential backoff uses "equal jitter" (half fixed, half random, drawn with
        ``uniform(low, high)``) so that many deliveries failing together do not retry in
        lockstep; a sink's ``Retry-After`` wins when it asks for longer, up to ``retryaftermax``.
        """
        if self.backoff == "linear":
            base = min(self.maxdelay, self.initialdelay * attempts)
        else:
            base = min(self.maxdelay, self.initialdelay * 2.0 ** min(attempts - 1, 60))
            base = base / 2 + uniform(0, base / 2)
        if retry_after is not None:
            base = max(base, min(retry_after, self.retryaftermax))
        return base

    def gives_up(self, attempts: int, next_at: float, first_at: float) -> bool:
        """Whether a delivery that failed ``attempts`` times must not be tried at ``next_at``."""
        if self.maxattempts and attempts >= self.maxattempts:
            return True
        return next_at > first_at + self.ttl


#: The settings of a subscription whose ``config`` says nothing.
DEFAULTS = DeliverySettings()

_FLOATS = (
    "initialdelay",
    "maxdelay",
    "ttl",
    "retryaftermax",
    "timeout",
    "ratelimit",
    "probemaxdelay",
    "maxbatchdelay",
)
_INTS = ("maxattempts", "concurrency", "maxbatchsize", "maxbatchbytes")
#: Every ``config`` key the settings read.
POLICY_KEYS = (*_FLOATS, *_INTS, "backoff", "deadlettersink", "ordering", "startfrom")
#: ... and ``reply``, declared for the API by the pipeline with the replies it governs.
SETTINGS_KEYS = (*POLICY_KEYS, "reply")
#: Keys that may be 0.
_ZERO_ALLOWED = ("maxattempts", "maxbatchdelay")


def _number(key: str, value: Any, problems: list[FieldProblem], kind: type[int] | type[float]) -> Any:
    try:
        if isinstance(value, bool):
            raise ValueError
        number = kind(value)
    except (TypeError, ValueError):
        problems.append(FieldProblem(f"/config/{key}", f"must be a {'whole ' if kind is int else ''}number"))
        return None
    if number < 0 or (number == 0 and key not in _ZERO_ALLOWED):
        problems.append(FieldProblem(f"/config/{key}", "must be positive"))
        return None
    if key == "concurrency" and number > MAX_CONCURRENCY:
        problems.append(FieldProblem("/config/concurrency", f"must be at most {MAX_CONCURRENCY}"))
        return None
    if key == "maxbatchsize" and number > MAX_BATCH_EVENTS:
        problems.append(FieldProblem(f"/config/{key}", f"must be at most {MAX_BATCH_EVENTS}"))
        return None
    if key == "maxbatchdelay" and number > MAX_BATCH_DELAY:
        problems.append(FieldProblem(f"/config/{key}", f"must be at most {MAX_BATCH_DELAY:g} seconds"))
        return None
    return number


def parse_delivery_settings(config: Mapping[str, Any]) -> DeliverySettings:
    """The settings ``config`` describes (keys it does not read are left to other parts).

    Raises :class:`ValidationError` naming ``/config/<key>`` for every bad value; the
    Subscriptions API refuses such a subscription with these problems.
    """
    problems: list[FieldProblem] = []
    values: dict[str, Any] = {}
    for key in _FLOATS:
        if config.get(key) not in (None, ""):
            values[key] = _number(key, config[key], problems, float)
    for key in _INTS:
        if config.get(key) not in (None, ""):
            values[key] = _number(key, config[key], problems, int)
    backoff = config.get("backoff")
    if backoff is not None:
        if str(backoff).lower() not in BACKOFFS:
            problems.append(FieldProblem("/config/backoff", "must be 'exponential' or 'linear'"))
        else:
            values["backoff"] = str(backoff).lower()
    ordering = config.get("ordering")
    if ordering is not None:
        if not isinstance(ordering, str) or ordering.lower() not in ORDERINGS:
            problems.append(FieldProblem("/config/ordering", "must be 'partitionkey' or 'none'"))
        else:
            values["ordering"] = ordering.lower() == "partitionkey"
    start = config.get("startfrom")
    if start is not None:
        try:
            values["startfrom"] = _start(start)
        except ValueError:
            problems.append(
                FieldProblem("/config/startfrom", "must be 'now', 'earliest' or an RFC 3339 timestamp")
            )
    sink = config.get("deadlettersink")
    if sink is not None:
        if not isinstance(sink, str) or not sink.startswith(("http://", "https://")):
            problems.append(FieldProblem("/config/deadlettersink", "must be an http(s) URL"))
        elif "@" in sink.split("/", 3)[2]:
            # Userinfo would be stored, listed and logged with the URL (it is no credential store).
            problems.append(
                FieldProblem(
                    "/config/deadlettersink",
                    "must not carry user information (a user name, password or token before '@'):"
                    " a URL is stored, listed and logged; give credentials in 'sinkcredential'",
                )
            )
        else:
            values["deadlettersink"] = sink
    reply = config.get("reply")
    if reply is not None:
        if not isinstance(reply, str) or reply.lower() not in REPLY_MODES:
            problems.append(FieldProblem("/config/reply", "must be 'publish' or 'off'"))
        else:
            values["reply"] = reply.lower() == "publish"
    if problems:
        raise ValidationError(problems)
    given = {k: v for k, v in values.items() if v is not None}
    return DeliverySettings(**given) if given else DEFAULTS


#: What the pointer of a ``config`` member starts with.
_POINTER = "/config/"


def stored_delivery_settings(config: Mapping[str, Any]) -> DeliverySettings:
    """The settings of a subscription already accepted (realized by the API, or read from a
    store): as :func:`parse_delivery_settings`, except that a value the rules of this release
    refuse (only a record stored by an earlier release can hold one) takes its default, and
    a warning names it. Every other member keeps its value: one bad member never resets the
    others (a rate limit or a dead-letter sink is never dropped for a neighbour's sake)."""
    try:
        return parse_delivery_settings(config)
    except ValidationError as exc:
        refused = {problem.pointer.removeprefix(_POINTER) for problem in exc.problems}
    log.warning(
        "a stored subscription's config holds values this release refuses; their defaults apply: %s",
        ", ".join(sorted(_POINTER + key for key in refused)),
    )
    return parse_delivery_settings({k: v for k, v in config.items() if k not in refused})


def _start(value: Any) -> float | None:
    """Epoch seconds of a ``startfrom`` (0 for ``earliest``), or None for ``now``.

    Raises:
        ValueError: none of ``now``, ``earliest`` or an RFC 3339 timestamp.
    """
    if not isinstance(value, str):
        raise ValueError("startfrom is not a string")
    if value.lower() == "now":
        return None
    if value.lower() == "earliest":
        return 0.0
    return instant(value)


def instant(text: str) -> float:
    """Epoch seconds of an RFC 3339 timestamp (checked with ``is_timestamp`` first; a leap
    second counts as the second before it).

    Raises:
        ValueError: not an RFC 3339 timestamp.
    """
    if not is_timestamp(text):
        raise ValueError(f"not an RFC 3339 timestamp: {text[:64]!r}")
    date, _, rest = text.replace("t", "T").replace("z", "Z").partition("T")
    if rest[6:8] == "60":
        rest = rest[:6] + "59" + rest[8:]
    return datetime.fromisoformat(f"{date}T{rest}").timestamp()

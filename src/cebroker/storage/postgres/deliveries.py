"""The delivery log on PostgreSQL, shared by every broker instance on the database.

It is one class, :class:`PostgresDeliveryLog`, made of one part per contract, each in its own
module: :mod:`.ingest` (``append``, group commit), :mod:`.claims` (the due queue as claims,
leases, wake-ups, shared token buckets), :mod:`.outcomes` (completions, retries, dead letters,
expiry), :mod:`.deadletters` (pages, redrive), :mod:`.stats` (counts), :mod:`.cleanup`, on
:mod:`.rows` (the statements and helpers every part shares). Ordering groups: :mod:`.ordering`;
the server functions (``cebroker_append``, ``cebroker_claim_many``, ``cebroker_complete``):
``sql/deliveries/``.

**Lock order.** Every transaction here and in the server functions takes its locks in one order,
so that no two wait for each other in a cycle (no ``deadlock detected``): the replays' boundary
lock; the delivery rows it removes or claims, with the claims counts their triggers keep (in
subscription order); the replays' rows (in replay order); the ordering groups' advisory locks
(in key order); the stats rows (in subscription order); the backlog and archive shards, last.
One exception: cancelling a replay locks the replay's row before it removes the replay's
unclaimed deliveries, which completions (of claimed deliveries) do not touch unless a claim was
taken over meanwhile.

With a retention every event is written ``archived`` and stays until
:class:`~cebroker.storage.postgres.archive.PostgresEventArchive` prunes it; otherwise an event
row goes with its last delivery.
"""

from __future__ import annotations

from collections import deque

from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.storage.postgres.claims import PostgresClaims
from cebroker.storage.postgres.cleanup import PostgresCleanup
from cebroker.storage.postgres.database import Database
from cebroker.storage.postgres.deadletters import PostgresDeadLetters
from cebroker.storage.postgres.ingest import PostgresIngest
from cebroker.storage.postgres.instances import Membership
from cebroker.storage.postgres.listener import DUE, Listener
from cebroker.storage.postgres.outcomes import PostgresOutcomes
from cebroker.storage.postgres.stats import PostgresStats


class PostgresDeliveryLog(
    PostgresIngest, PostgresClaims, PostgresOutcomes, PostgresDeadLetters, PostgresStats, PostgresCleanup
):
    """:class:`~cebroker.storage.deliveries.DeliveryLog` and
    :class:`~cebroker.storage.claims.Claims` on a PostgreSQL :class:`Database`, shared by every
    instance on it; see the module docstring."""

    def __init__(
        self,
        db: Database,
        listener: Listener,
        membership: Membership,
        *,
        dedup_window: float,
        clock: Clock = SYSTEM_CLOCK,
        retention: float = 0.0,
    ) -> None:
        self._db = db
        self._membership = membership
        self.dedup_window = dedup_window
        self.retention = retention
        self._clock = clock
        self._waiting = deque()
        #: Deliveries confirmed whose removal failed, oldest first (see ``complete``).
        self._unrecorded = {}
        #: Events of the calls in ``_waiting``.
        self._queued = 0
        self._groups = 0
        #: Whether a group's task waits to start (it takes the calls waiting then).
        self._forming = False
        self._long_at = {}
        self._second = None
        self._claims = []
        self._claiming = False
        self._limited = {}
        self._announced = set()
        self._announcer = None
        self._listeners = []
        listener.on(DUE, self._heard)
        listener.on_connect(lambda: self._tell(None))
        membership.on_lost(lambda: self._tell(None))
        membership.before_leave(self._record_unrecorded)

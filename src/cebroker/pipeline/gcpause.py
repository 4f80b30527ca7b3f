"""The garbage collector's policy: start-up objects frozen, young collections less often, full
collections held off while a large batch is in flight.

**Frozen at start-up.** Once the server has started (the app built, the storage open, every
subscription loaded into the index), :func:`freeze_started` moves every object then alive out
of the collector's reach (``gc.freeze()``): they mostly live as long as the process and form no
garbage, yet each full collection scanned them all, and under load the objects of the requests
in flight survive the young collections often enough to start one. Measured on single-event
ingress (``perf``, the broker's whole process): the collector took 17 % of its CPU time before,
2.5 % after. Objects created later are collected as before. What the freeze costs: a frozen
object that later becomes part of unreachable cycles (a structure start-up built and a change
replaced) is never collected; that is bounded by what start-up built, once, and does not grow.

**Young collections less often.** The collector runs a young (generation 0) collection each
time the objects it tracks have grown by a threshold, 700 by default: a count of objects created
minus those freed, so short-lived objects alone rarely start one. A delivery lane's queue holds
up to 256 deliveries of a few tracked objects each and a load brings up to 256 at once, so with
700 a load's arrival started a young collection that traced every queued delivery and moved the
survivors to the older generations, to be traced again there. From start-up on the threshold is
:data:`YOUNG_THRESHOLD`, above what the lanes and the requests in flight hold: measured on
``bench_delivery``'s drain (20,000 deliveries, ``gc.callbacks``), the collector took 1.6 µs per
delivery at 700, 0.6 at 2,000 and nothing at 10,000. Cycles among short-lived objects are still
collected, after more allocations (at most :data:`YOUNG_THRESHOLD` objects wait for it).

**Paused for large batches.**
Ingesting a maximum-size batch creates a few million objects that live until the batch is
committed. CPython runs a full (generation 2) collection each time the long-lived objects have
grown by a quarter, and each one scans every object in the process while holding the
interpreter lock: with a batch in memory that is hundreds of milliseconds during which no other
request is served (measured: up to 350 ms per collection, several per batch). Those objects
form no reference cycles, so scanning them finds nothing.

While at least one pause is held, only the young generations are collected (cheap, and they
still catch the cycles short-lived objects form); the full collections resume once the last
pause is released, by which time the batch's objects are gone.
"""

from __future__ import annotations

import gc
import threading

#: The generation-2 threshold while paused: far more generation-1 collections than a batch causes.
_PAUSED = 1_000_000
#: The generation-0 threshold from start-up on (see the module docstring).
YOUNG_THRESHOLD = 10_000


class FullCollectionPause:
    """A process-wide, counted pause of full collections (the collector is process-wide too)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._saved: int | None = None

    def acquire(self) -> None:
        """Hold off full collections until the matching :meth:`release`."""
        with self._lock:
            if self._holders == 0:
                first, second, third = gc.get_threshold()
                self._saved = third
                gc.set_threshold(first, second, max(third, _PAUSED))
            self._holders += 1

    def release(self) -> None:
        """Undo one :meth:`acquire`; the last one restores the collector's threshold."""
        with self._lock:
            if self._holders == 0:
                return
            self._holders -= 1
            if self._holders == 0 and self._saved is not None:
                first, second, _ = gc.get_threshold()
                gc.set_threshold(first, second, self._saved)
                self._saved = None

    @property
    def held(self) -> bool:
        """Whether any pause is held now."""
        return self._holders > 0


#: The one pause of this process.
PAUSE = FullCollectionPause()


def freeze_started() -> None:
    """Collect what start-up left behind, freeze every object still alive and collect the young
    generation less often from now on (see the module docstring). Called once by the serving
    process when its start-up is complete."""
    gc.collect()
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, second, third)

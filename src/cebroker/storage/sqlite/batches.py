"""Work queued for a storage thread, taken in batches."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")


def batches(source: queue.SimpleQueue[T | None], limit: int = 0) -> Iterator[list[T]]:
    """Each time something is queued: it and whatever else is queued by then (at most
    ``limit`` items; 0: no limit), until ``None`` is taken (the batch before it is still
    yielded)."""
    while True:
        first = source.get()
        if first is None:
            return
        batch = [first]
        stopping = False
        while not limit or len(batch) < limit:
            try:
                item = source.get_nowait()
            except queue.Empty:
                break
            if item is None:
                stopping = True
                break
            batch.append(item)
        yield batch
        if stopping:
            return

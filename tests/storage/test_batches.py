"""Work taken from a storage thread's queue in batches (cebroker.storage.sqlite.batches)."""

from __future__ import annotations

import queue

from cebroker.storage.sqlite.batches import batches


def test_a_batch_is_what_is_queued_up_to_the_limit_and_the_end_ends_it() -> None:
    source: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    for item in (1, 2, 3, 4, 5, None, 6):
        source.put(item)
    assert list(batches(source, 2)) == [[1, 2], [3, 4], [5]]
    assert source.get_nowait() == 6  # nothing after the end is taken


def test_without_a_limit_a_batch_takes_everything_queued() -> None:
    source: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    for item in (1, 2, 3, None):
        source.put(item)
    assert list(batches(source)) == [[1, 2, 3]]

"""The CircuitStore contract, run against every storage backend: opening once (a second opener
adopts the first), one probe at a time through a lease that runs out, failed probes, closing,
atomic races between instances, and survival across a reopen (issue "Sink outages": a circuit
per sink, shared by every broker instance on the storage)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cebroker.storage import Circuit, CircuitStore, Storage
from storage.support import STORAGES, opened

T = 1_000_000.0


def test_satisfies_the_protocol(storage: Storage) -> None:
    assert isinstance(storage.circuits, CircuitStore)


async def test_a_circuit_opens_once_and_a_second_opener_adopts_it(storage: Storage) -> None:
    circuits = storage.circuits
    assert await circuits.circuits() == {}
    first = await circuits.open("a", at=T, next_probe_at=T + 1, error="sink answered 503")
    assert first == Circuit("a", T, T + 1, 0, "sink answered 503", None)
    again = await circuits.open("a", at=T + 5, next_probe_at=T + 6, error="timeout")
    assert again == first  # opened earlier elsewhere: since then
    await circuits.open("b", at=T + 2, next_probe_at=T + 3, error="refused")
    assert sorted(await circuits.circuits()) == ["a", "b"]
    assert (await circuits.circuits())["a"] == first


async def test_one_probe_at_a_time_while_its_lease_runs(storage: Storage) -> None:
    circuits = storage.circuits
    await circuits.open("a", at=T, next_probe_at=T + 1, error="503")
    early, granted = await circuits.claim_probe("a", now=T + 0.5, until=T + 20)
    assert (early, granted) == (Circuit("a", T, T + 1, 0, "503", None), False)
    held, granted = await circuits.claim_probe("a", now=T + 1, until=T + 20)
    assert granted
    assert held is not None
    assert held.probe_until == T + 20
    other, granted = await circuits.claim_probe("a", now=T + 2, until=T + 30)
    assert not granted  # another instance's probe holds it
    assert other == held
    # The holder went away without a word: once its lease has run out another may probe.
    taken, granted = await circuits.claim_probe("a", now=T + 20, until=T + 40)
    assert granted
    assert taken is not None
    assert taken.probe_until == T + 40


async def test_a_failed_probe_counts_sets_the_next_and_releases_the_lease(storage: Storage) -> None:
    circuits = storage.circuits
    await circuits.open("a", at=T, next_probe_at=T + 1, error="503")
    await circuits.claim_probe("a", now=T + 1, until=T + 20)
    failed = await circuits.probe_failed("a", next_probe_at=T + 3, error="connection refused")
    assert failed == Circuit("a", T, T + 3, 1, "connection refused", None)
    assert (await circuits.claim_probe("a", now=T + 2, until=T + 20))[1] is False
    assert (await circuits.claim_probe("a", now=T + 3, until=T + 20))[1] is True
    failed = await circuits.probe_failed("a", next_probe_at=T + 7, error="503")
    assert failed is not None
    assert (failed.failed_probes, failed.opened_at, failed.last_error) == (2, T, "503")
    assert (await circuits.circuits())["a"] == failed


async def test_closing_forgets_the_circuit(storage: Storage) -> None:
    circuits = storage.circuits
    await circuits.open("a", at=T, next_probe_at=T + 1, error="503")
    await circuits.open("b", at=T, next_probe_at=T + 1, error="503")
    assert await circuits.close("a") is True
    assert await circuits.close("a") is False
    assert sorted(await circuits.circuits()) == ["b"]
    # An instance that still thinks it open learns that it closed.
    assert await circuits.claim_probe("a", now=T + 5, until=T + 20) == (None, False)
    assert await circuits.probe_failed("a", next_probe_at=T + 9, error="503") is None
    assert sorted(await circuits.circuits()) == ["b"]
    reopened = await circuits.open("a", at=T + 10, next_probe_at=T + 11, error="timeout")
    assert reopened == Circuit("a", T + 10, T + 11, 0, "timeout", None)


async def test_racing_instances_get_one_probe(storage: Storage) -> None:
    circuits = storage.circuits
    await circuits.open("a", at=T, next_probe_at=T + 1, error="503")
    claims = await asyncio.gather(*(circuits.claim_probe("a", now=T + 1, until=T + 20) for _ in range(8)))
    assert sum(granted for _, granted in claims) == 1
    opens = await asyncio.gather(
        *(circuits.open("b", at=T + n, next_probe_at=T + 9, error=str(n)) for n in range(8))
    )
    assert len(set(opens)) == 1


async def test_open_circuits_survive_close_and_reopen(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    async with opened(STORAGES[backend](request, tmp_path)) as storage:
        await storage.circuits.open("a", at=T, next_probe_at=T + 1, error="503")
        await storage.circuits.claim_probe("a", now=T + 1, until=T + 20)
        await storage.circuits.probe_failed("a", next_probe_at=T + 4, error="timeout")
        await storage.circuits.open("b", at=T, next_probe_at=T + 1, error="503")
        await storage.circuits.close("b")
        before = await storage.circuits.circuits()
    async with opened(STORAGES[backend](request, tmp_path)) as storage:
        assert await storage.circuits.circuits() == before
        assert list(before) == ["a"]

"""The lanes' gate: a test marked ``alone`` runs while no other test holds the gate, and tests
that come after it wait for it rather than overtake it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from support.lanes import Gate
from support.waiting import wait_until


def _waiters(directory: Path) -> int:
    """How many ``flock`` requests on the gate's files are blocked right now (``/proc/locks``)."""
    inodes = {os.stat(directory / name).st_ino for name in ("lanes.turnstile", "lanes.gate")}
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if "->" in line and int(line.split()[6].rsplit(":", 1)[1]) in inodes)


def test_an_exclusive_holder_waits_for_the_shared_one_and_goes_before_later_ones(tmp_path: Path) -> None:
    gate = Gate(tmp_path)
    order: list[str] = []
    release_first = threading.Event()

    def hold(name: str, *, exclusive: bool, until: threading.Event | None = None) -> None:
        with gate.hold(exclusive=exclusive):
            order.append(f"{name} in")
            if until is not None:
                until.wait(30)
            order.append(f"{name} out")

    shared = {"exclusive": False, "until": release_first}
    first = threading.Thread(target=hold, args=("first",), kwargs=shared)
    first.start()
    wait_until(lambda: order == ["first in"], 10, "the first test to hold the gate")
    alone = threading.Thread(target=hold, args=("alone",), kwargs={"exclusive": True})
    alone.start()
    wait_until(lambda: _waiters(tmp_path) == 1, 10, "the alone test to wait for the gate")
    later = threading.Thread(target=hold, args=("later",), kwargs={"exclusive": False})
    later.start()
    wait_until(lambda: _waiters(tmp_path) == 2, 10, "the later test to wait at the turnstile")
    assert order == ["first in"]
    release_first.set()
    for thread in (first, alone, later):
        thread.join(30)
    assert order == ["first in", "first out", "alone in", "alone out", "later in", "later out"]


def test_shared_holders_hold_the_gate_together(tmp_path: Path) -> None:
    gate = Gate(tmp_path)
    with gate.hold(exclusive=False), gate.hold(exclusive=False):
        assert _waiters(tmp_path) == 0

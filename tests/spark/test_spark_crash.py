"""``cebroker spark-feed`` killed with SIGKILL in the middle of a micro-batch, then run again:
every row reaches the sink exactly once (the real command in its own process, its own JVM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from support.waiting import wait_until

from spark.conftest import LiveBroker
from spark.proxy import RefusingProxy

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = 300


def feed(inputs: Path, checkpoint: Path, url: str) -> subprocess.Popen[str]:
    """The real command, in a new session so that it and its JVM can be killed as a group."""
    args = [
        *("-m", "cebroker", "spark-feed", "--input", str(inputs), "--once", "--url", url),
        *("--master", "local[1]", "--checkpoint", str(checkpoint), "--batch-size", "20"),
        *("--type", "com.example.crash", "--option", "maxInFlight=1"),
    ]
    return subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )


def kill_group(process: subprocess.Popen[str]) -> None:
    """SIGKILL the command and everything it started (JVM, Python workers)."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def test_a_killed_feed_resumes_without_loss_or_duplicates(
    broker: LiveBroker, proxy: tuple[RefusingProxy, str], tmp_path: Path
) -> None:
    """The feed is killed while the broker refuses, after part of its only micro-batch was
    accepted; the same command run again re-sends the batch (same generated ids) and the sink
    gets each row once."""
    refusing, url = proxy
    inputs, checkpoint = tmp_path / "in", tmp_path / "ck"
    inputs.mkdir()
    rows = [json.dumps({"data": {"n": i}}) for i in range(ROWS)]
    (inputs / "rows.json").write_text("\n".join(rows) + "\n")

    refusing.refuse_after(4, seconds=600)  # 4 batches of 20 get in, then the broker "hangs"
    first = feed(inputs, checkpoint, url)
    try:
        wait_until(
            lambda: refusing.refused > 0 or first.poll() is not None,
            120,
            "the feed to reach the refusing broker (or to end)",
            interval=0.2,
        )
        assert refusing.refused > 0, "the feed never reached the refusing broker"
    finally:
        kill_group(first)
    accepted_before = refusing.forwarded_events
    assert accepted_before == 80

    refusing.refuse_after(10**6, seconds=0)
    second = feed(inputs, checkpoint, url)
    out, _ = second.communicate(timeout=240)
    assert second.returncode == 0, out
    assert f"done: {ROWS} rows in 1 batches" in out
    assert f"{accepted_before} already in the broker" in out

    events = broker.delivered(ROWS)
    counts = Counter(e["id"] for e in events)
    assert [key for key, n in counts.items() if n > 1] == []
    assert sorted(e["data"]["n"] for e in events) == list(range(ROWS))

"""``cebroker serve`` takes every file descriptor the system allows it: each delivery in flight
holds a connection, and the descriptors are the one resource every subscription shares."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

PROBE = "from cebroker.cli import raise_open_files_limit; print(raise_open_files_limit())"


def test_the_soft_limit_of_open_files_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip(f"the hard limit ({hard}) leaves nothing to raise")

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    raised = subprocess.run(
        [sys.executable, "-c", PROBE],
        preexec_fn=lower,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert int(raised.stdout) == hard

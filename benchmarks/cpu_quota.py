"""A CPU quota for benchmark processes: each process in its own control group, held to a share
of one core, the way a container runtime enforces a CPU limit (``limits: cpu: 250m`` in
Kubernetes is a quota of 25 ms per 100 ms period).

On a 2-core machine that runs the broker instances, their database and the sink at once,
instances that each take most of a core cannot add up; held to a quarter of a core each, as on
nodes of their own, they can, and what they then fail to add is what they cost one another
(their database's shared rows, its locks, its CPU). The cgroup v2 ``cpu`` controller is used
where the unified hierarchy offers it, else the v1 ``cpu`` hierarchy; both need root.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

#: The period of the quota, in microseconds (the kernel's and the container runtimes' default).
PERIOD_US = 100_000
_V2 = Path("/sys/fs/cgroup")
_V1 = Path("/sys/fs/cgroup/cpu")


def _hierarchy() -> tuple[Path, bool]:
    """The directory new groups go in, and whether it is cgroup v2."""
    controllers = _V2 / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return _V2, True
    if (_V1 / "cpu.cfs_quota_us").exists():
        return _V1, False
    raise SystemExit("a CPU quota needs the cgroup cpu controller (v2 or v1), which this machine lacks")


@contextmanager
def cpu_quota(pids: list[int], cores: float) -> Iterator[None]:
    """Hold each process of ``pids`` (with its threads) to ``cores`` of one CPU until the block
    ends; the groups are removed then (a process still running goes back to the root group)."""
    if not 0 < cores <= (os.cpu_count() or 1):
        raise SystemExit(f"a CPU quota of {cores} cores is not between 0 and the machine's cores")
    root, v2 = _hierarchy()
    groups: list[Path] = []
    try:
        for pid in pids:
            group = root / f"cebroker-bench-{pid}"
            try:
                group.mkdir()
            except PermissionError:
                raise SystemExit(f"a CPU quota needs root (cannot create {group})") from None
            groups.append(group)
            quota = int(cores * PERIOD_US)
            if v2:
                (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            else:
                (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(str(quota))
            (group / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        for group in groups:
            for member in (group / "cgroup.procs").read_text().split():
                with suppress(ProcessLookupError):  # gone meanwhile
                    (root / "cgroup.procs").write_text(member)
            group.rmdir()

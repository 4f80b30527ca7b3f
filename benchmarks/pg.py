"""PostgreSQL for the benchmarks, started the way the test suite starts it (its private cluster
in a temporary directory, run as the ``postgres`` user, on a free 127.0.0.1 port), so that no
benchmark needs any setup; plus the readings the multi-instance benchmarks print: CPU time of
processes (broker instances, the PostgreSQL server, the sink, the load generator), the
server's transaction count and, with ``pg_stat_statements`` loaded, its busiest statements.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from servers.postgres import PostgresServer  # noqa: E402  (the test suite's server, from tests/)

_TICKS = os.sysconf("SC_CLK_TCK")


class BenchPostgres(PostgresServer):
    """The test suite's cluster, with ``pg_stat_statements`` loaded (to count statements)."""

    def command(self) -> list[str]:
        extra = ["-c", "shared_preload_libraries=pg_stat_statements", "-c", "pg_stat_statements.track=all"]
        return [*super().command(), *extra]


@contextmanager
def postgres() -> Iterator[BenchPostgres]:
    """A started PostgreSQL 15, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="cebroker-bench-") as tmp:
        server = BenchPostgres(Path(tmp))
        try:
            server.start()
            yield server
        finally:
            server.close()


def server_pids(server: PostgresServer) -> list[int]:
    """The postmaster and every backend and worker it forked."""
    process = server._process
    if process is None:
        return []
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(process.pid)], capture_output=True, text=True)
    return [process.pid, *(int(p) for p in out.stdout.split())]


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU seconds the processes ``pids`` have used so far (gone ones count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / _TICKS


def own_cpu() -> float:
    """CPU seconds of this process."""
    times = os.times()
    return times.user + times.system


def commits(url: str) -> int:
    """Transactions committed in the database of ``url`` so far."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
        return int(row[0]) if row else 0


def lock_waits(url: str) -> int:
    """Backends of the database of ``url`` waiting on a lock right now (row locks included)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock'"
        ).fetchone()
        return int(row[0]) if row else 0


def reset_statements(url: str) -> None:
    """Start counting statements afresh."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("SELECT pg_stat_statements_reset()")


def top_statements(url: str, limit: int = 8) -> list[tuple[int, float, str]]:
    """The statements with the most total execution time since the reset: (calls, total ms,
    the statement's first 90 characters)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT calls, total_exec_time, query FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND toplevel ORDER BY total_exec_time DESC LIMIT %s",
            (limit,),
        ).fetchall()
    return [(int(c), float(t), " ".join(str(q).split())[:90]) for c, t, q in rows]


def uptime() -> str:
    """``uptime``'s line (with the load average)."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()

"""Observers for "nothing was read, nothing was fetched": a Linux inotify watch that sees every
open of a file, and a TCP listener that counts the connections made to it."""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import threading
from pathlib import Path
from types import TracebackType

_IN_ACCESS = 0x001
_IN_OPEN = 0x020
_EVENT = struct.Struct("iIII")


class FileWatch:
    """Counts the opens and reads of one file (inotify ``IN_OPEN | IN_ACCESS``) while active."""

    def __init__(self, path: Path) -> None:
        self._libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        if self._libc.inotify_add_watch(self._fd, os.fsencode(path), _IN_OPEN | _IN_ACCESS) < 0:
            raise OSError(ctypes.get_errno(), f"cannot watch {path}")
        self.touches = 0

    def poll(self) -> int:
        """Read what the kernel reported so far; returns the running count of opens and reads."""
        while True:
            try:
                data = os.read(self._fd, 4096)
            except BlockingIOError:
                return self.touches
            offset = 0
            while offset < len(data):
                _wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size + length
                if mask & (_IN_OPEN | _IN_ACCESS):
                    self.touches += 1

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class ConnectionCounter:
    """A TCP listener on 127.0.0.1 that accepts and counts connections (closing each at once)."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> ConnectionCounter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

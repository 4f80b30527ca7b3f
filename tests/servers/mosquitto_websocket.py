"""MQTT over WebSocket for tests: a loopback WebSocket endpoint relaying to mosquitto's TCP listener.

The packaged mosquitto (2.0, libwebsockets) opens its WebSocket listeners on every interface
whatever the ``listener`` address, ``bind_interface`` or ``socket_domain`` say (or refuses to
start with them), and the tests must listen on 127.0.0.1 only. So this relay speaks the server
side of RFC 6455 itself, with the ``mqtt`` subprotocol of MQTT 5.0 section 6, on a free loopback
port, and carries the MQTT bytes of each binary frame to mosquitto and back unchanged: the client
under test really speaks MQTT over WebSocket, and mosquitto does the MQTT.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
import ssl
import threading
from typing import BinaryIO

from servers.base import free_port

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
_CONTINUATION, _BINARY, _CLOSE, _PING, _PONG = 0x0, 0x2, 0x8, 0x9, 0xA


class WebSocketRelay:
    """A WebSocket endpoint on 127.0.0.1 at ``path`` relaying MQTT to ``target_port``, over TLS
    when given a server ``tls`` context.

    ``handshakes`` records the path and subprotocol of every upgrade request and ``frames`` counts
    the binary frames relayed from clients, so tests can show the traffic went over WebSocket.
    """

    def __init__(
        self,
        target_port: int,
        *,
        path: str = "/mqtt",
        target_host: str = "127.0.0.1",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host, self.port, self.path, self.tls = "127.0.0.1", free_port(), path, tls
        self.target = (target_host, target_port)
        self.handshakes: list[tuple[str, str]] = []
        self.frames = 0
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The ``ws://`` (``wss://`` with ``tls``) URL of the endpoint, with its path."""
        return f"{'wss' if self.tls else 'ws'}://{self.host}:{self.port}{self.path}"

    def start(self) -> None:
        """Listen and accept connections in a daemon thread."""
        self._listener = socket.create_server((self.host, self.port))
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def stop(self) -> None:
        """Stop listening and close every relayed connection."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in [self._listener, *sockets]:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        self._listener = None

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by stop()
                return
            with self._lock:
                self._sockets.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            if self.tls is not None:  # the TLS handshake, in this connection's thread
                client = self.tls.wrap_socket(client, server_side=True)
            reader = client.makefile("rb")
            if not self._handshake(client, reader):
                client.close()
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._sockets.append(upstream)
            threading.Thread(target=self._downstream, args=(upstream, client), daemon=True).start()
            self._upstream(reader, client, upstream)
        with contextlib.suppress(OSError):
            client.close()

    def _handshake(self, client: socket.socket, reader: BinaryIO) -> bool:
        lines = []
        while (line := reader.readline(8192)) not in (b"\r\n", b""):
            lines.append(line.decode("latin-1").rstrip("\r\n"))
        if not lines:
            return False
        path = lines[0].split(" ")[1] if len(lines[0].split(" ")) == 3 else ""
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
        offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
        self.handshakes.append((path, ",".join(offered)))
        key = headers.get("sec-websocket-key", "")
        if path != self.path or "mqtt" not in offered or not key:
            client.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return False
        accept = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
        client.sendall(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n".encode()
        )
        return True

    def _upstream(self, reader: BinaryIO, client: socket.socket, upstream: socket.socket) -> None:
        """Client frames (masked, section 5.3) to MQTT bytes for mosquitto."""
        read = reader.read
        while True:
            head = read(2)
            if len(head) < 2:
                break
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = int.from_bytes(read(2), "big")
            elif length == 127:
                length = int.from_bytes(read(8), "big")
            mask = read(4) if head[1] & 0x80 else b"\0\0\0\0"
            payload = _unmask(read(length), mask)
            if opcode in (_BINARY, _CONTINUATION):
                self.frames += 1
                upstream.sendall(payload)
            elif opcode == _PING:
                client.sendall(_frame(_PONG, payload))
            elif opcode == _CLOSE:
                client.sendall(_frame(_CLOSE, payload[:2]))
                break
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_RDWR)

    @staticmethod
    def _downstream(upstream: socket.socket, client: socket.socket) -> None:
        """mosquitto's bytes to unmasked binary frames for the client."""
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                client.sendall(_frame(_BINARY, data))
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_RDWR)


def _unmask(payload: bytes, mask: bytes) -> bytes:
    if not payload:
        return payload
    repeated = (mask * (len(payload) // 4 + 1))[: len(payload)]
    value = int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")
    return value.to_bytes(len(payload), "big")


def _frame(opcode: int, payload: bytes) -> bytes:
    """A final, unmasked server frame (section 5.2)."""
    size = len(payload)
    if size < 126:
        header = bytes([0x80 | opcode, size])
    elif size < 1 << 16:
        header = bytes([0x80 | opcode, 126]) + size.to_bytes(2, "big")
    else:
        header = bytes([0x80 | opcode, 127]) + size.to_bytes(8, "big")
    return header + payload

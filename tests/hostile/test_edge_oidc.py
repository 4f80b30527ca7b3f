"""No issuer amplification (issue: hardening, finding 5): while the OIDC issuer is down or hangs
and no keys are cached, JWT-shaped bearers cost the issuer one request, not one each, and no
call waits behind a hanging fetch longer than a short bound (a real ``cebroker serve`` process
and a real issuer on a socket of the test, which counts what it is asked)."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from cebroker.auth.oidc import FIRST_BACKOFF, WAIT_BOUND
from hostile.support import HostileBroker

BEARERS = 20
#: A call refused while the issuer hangs: the wait bound, plus what a busy machine adds.
ANSWER_BOUND = WAIT_BOUND + 1.5


class Issuer:
    """An issuer on 127.0.0.1 that reads each request and then hangs (``hang``) or answers 503;
    ``hits`` counts the requests it read."""

    def __init__(self, *, hang: bool) -> None:
        self.hang = hang
        self.hits = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._open: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._open.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        data = b""
        conn.settimeout(10)
        try:
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            self.hits += 1
            if not self.hang:
                conn.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
                conn.close()
        except OSError:
            return

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        for conn in self._open:
            conn.close()
        self._thread.join(timeout=5)


def jwt_shaped(n: int) -> str:
    """A token that looks like an RS256 JWT of a key the broker has never seen."""

    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'kid': f'k{n}', 'typ': 'JWT'})}.{part({'sub': str(n)})}.c2ln"


@pytest.fixture(params=["hanging", "failing"])
def issuer(request: pytest.FixtureRequest) -> Iterator[Issuer]:
    served = Issuer(hang=request.param == "hanging")
    try:
        yield served
    finally:
        served.close()


@pytest.fixture
def broker(issuer: Issuer, tmp_path: Path) -> Iterator[HostileBroker]:
    keys = tmp_path / "keys.json"
    digest = hashlib.sha256(b"the-admin-key").hexdigest()
    keys.write_text(json.dumps({"keys": [{"id": "ops", "sha256": digest, "scopes": ["admin"]}]}))
    process = HostileBroker(
        tmp_path / "oidc.db",
        tmp_path / "broker.log",
        "--api-keys",
        str(keys),
        "--oidc-issuer",
        issuer.url,
        "--oidc-audience",
        "cebroker",
        "--webhook-validation",
        "off",
    )
    process.start()
    try:
        process.ready()
        yield process
    finally:
        process.close()


def _call(url: str, token: str) -> tuple[int, float, str | None]:
    started = time.perf_counter()
    response = httpx.get(f"{url}/subscriptions", headers={"authorization": f"Bearer {token}"}, timeout=30)
    return response.status_code, time.perf_counter() - started, response.headers.get("retry-after")


def test_bearers_cost_the_issuer_one_request_and_wait_a_bounded_time(
    broker: HostileBroker, issuer: Issuer
) -> None:
    started = time.monotonic()
    with ThreadPoolExecutor(BEARERS) as pool:
        answers = list(pool.map(lambda n: _call(broker.url, jwt_shaped(n)), range(BEARERS)))
    # And as many again one after the other, while the issuer still hangs or fails.
    answers += [_call(broker.url, jwt_shaped(BEARERS + n)) for n in range(BEARERS)]
    elapsed = time.monotonic() - started
    slowest = max(seconds for _, seconds, _ in answers)
    # The first fetch, then at most one per back-off period (the back-off doubles; on a busy
    # machine the calls may take longer than the first period).
    allowed = 1 + int(elapsed // FIRST_BACKOFF)
    print(
        f"issuer {'hanging' if issuer.hang else 'failing'}: {issuer.hits} hits for {len(answers)} "
        f"bearers in {elapsed:.1f} s (allowed {allowed}), slowest answer {slowest * 1000:.0f} ms"
    )
    assert {status for status, _, _ in answers} == {503}
    assert all(retry is not None and int(retry) >= 1 for _, _, retry in answers)
    assert 1 <= issuer.hits <= allowed
    assert slowest < ANSWER_BOUND
    # API keys do not depend on the issuer at all.
    status, seconds, _ = _call(broker.url, "the-admin-key")
    assert status == 200
    assert seconds < ANSWER_BOUND

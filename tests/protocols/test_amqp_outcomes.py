"""Each AMQP send's own outcome when many are out at once: a window of sends settled by the peer
in one go, refusals, a peer that never settles, a connection closed mid-window and a detached
link, against proton's own container as the peer (``amqp_peer``)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from ceprotocols.amqp import binding as amqp_binding
from ceprotocols.amqp import deliveries
from ceprotocols.amqp.connection import AmqpConnection
from ceprotocols.amqp.settings import SCHEMES, AmqpSettings, parse_settings
from ceprotocols.endpoint import sink_endpoint
from ceprotocols.errors import DeliveryError, DeliveryRejected, DeliveryTimeout, TargetUnreachable
from proton import Connection, Transport

from protocols.amqp_peer import Action, AmqpPeer
from protocols.ce_samples import make_event


def _settings(url: str) -> AmqpSettings:
    return parse_settings({"address": "/queue/outcomes"}, sink_endpoint(url, schemes=SCHEMES))


async def _send_window(
    peer: AmqpPeer, count: int, within: float = 10.0
) -> tuple[list[BaseException | None], bool]:
    """Send ``count`` messages in one turn of the event loop; each one's outcome (None for
    accepted) and whether the connection was then given up."""
    connection = await AmqpConnection(peer.url, None).open(10.0)
    settings = _settings(peer.url)
    try:
        results = await asyncio.gather(
            *(connection.send(settings, amqp_binding.to_binary(make_event()), within) for _ in range(count)),
            return_exceptions=True,
        )
        return list(results), connection.broken
    finally:
        await connection.close()


async def test_a_window_settled_together_gives_each_send_its_own_outcome() -> None:
    """16 sends out at once, settled by the peer with different outcomes: each send gets its
    own: accepted is done, rejected is final, released and modified may be retried."""
    plan: dict[int, Action] = {3: "reject", 7: "release", 11: "modify"}
    with AmqpPeer(lambda n: plan.get(n, "accept")) as peer:
        results, broken = await _send_window(peer, 16)
    assert peer.received == [plan.get(n, "accept") for n in range(16)]
    for n, result in enumerate(results):
        if n not in plan:
            assert result is None, (n, result)
            continue
        assert isinstance(result, DeliveryRejected), (n, result)
        assert result.status == {"reject": "rejected", "release": "released", "modify": "modified"}[plan[n]]
        assert result.retryable is (plan[n] != "reject")
    assert not broken  # (a refused message is the message's failure, not the connection's)


async def test_a_message_never_settled_fails_at_its_deadline_and_the_others_do_not_wait() -> None:
    """One message the peer holds unsettled times out at its own deadline; the others, settled
    after it, are done when they are settled, not at the held one's deadline."""
    with AmqpPeer(lambda n: "hold" if n == 0 else "accept") as peer:
        connection = await AmqpConnection(peer.url, None).open(10.0)
        settings = _settings(peer.url)
        loop = asyncio.get_running_loop()
        try:
            held = asyncio.ensure_future(connection.send(settings, amqp_binding.to_binary(make_event()), 1.0))
            await asyncio.sleep(0)
            started = loop.time()
            await asyncio.gather(
                *(connection.send(settings, amqp_binding.to_binary(make_event()), 10.0) for _ in range(4))
            )
            others_done = loop.time() - started
            with pytest.raises(DeliveryTimeout):
                await held
            held_done = loop.time() - started
        finally:
            await connection.close()
    assert others_done < 0.9 < held_done < 6.0


async def test_a_shorter_deadline_after_a_longer_one_is_kept() -> None:
    """A send whose deadline is earlier than those already waiting fails at its own."""
    with AmqpPeer(lambda n: "hold") as peer:
        connection = await AmqpConnection(peer.url, None).open(10.0)
        settings = _settings(peer.url)
        loop = asyncio.get_running_loop()
        try:
            long = asyncio.ensure_future(
                connection.send(settings, amqp_binding.to_binary(make_event()), 30.0)
            )
            await asyncio.sleep(0)
            started = loop.time()
            with pytest.raises(DeliveryTimeout):
                await connection.send(settings, amqp_binding.to_binary(make_event()), 0.3)
            assert loop.time() - started < 5.0
            assert not long.done()
        finally:
            await connection.close()
        with pytest.raises(TargetUnreachable):  # (unsettled when the connection closed)
            await long


async def test_a_connection_closed_mid_window_fails_the_unsettled_sends_only() -> None:
    """The peer accepts the first 5 messages of a window and closes the connection at the 6th:
    the first 5 are done, the other 11 fail as unreachable (the pipeline keeps them pending and
    sends them again), and the connection is given up."""
    with AmqpPeer(lambda n: "accept" if n < 5 else "close") as peer:
        results, broken = await _send_window(peer, 16)
    assert results[:5] == [None] * 5
    assert all(isinstance(r, TargetUnreachable) for r in results[5:]), results[5:]
    assert broken


async def test_a_send_after_the_connection_ended_fails_at_once() -> None:
    with AmqpPeer(lambda n: "close") as peer:
        connection = await AmqpConnection(peer.url, None).open(10.0)
        settings = _settings(peer.url)
        try:
            with pytest.raises(TargetUnreachable):
                await connection.send(settings, amqp_binding.to_binary(make_event()), 10.0)
            with pytest.raises(TargetUnreachable):
                await connection.send(settings, amqp_binding.to_binary(make_event()), 10.0)
            assert connection.broken
        finally:
            await connection.close()


@pytest.mark.parametrize(
    ("condition", "final"), [("amqp:not-found", True), ("amqp:resource-limit-exceeded", False)]
)
async def test_a_detached_link_fails_its_sends_with_the_peers_condition(condition: str, final: bool) -> None:
    """A link the peer detaches fails its sends: finally for a missing node or a refused access,
    retryably otherwise; the connection is given up."""
    with AmqpPeer(lambda n: "accept", detach_with=condition) as peer:
        results, broken = await _send_window(peer, 3)
    for result in results:
        assert isinstance(result, DeliveryError)
        assert condition in str(result)
        assert result.retryable is not final
        assert isinstance(result, DeliveryRejected if final else TargetUnreachable)
    assert broken


async def test_a_quiet_connection_keeps_the_peers_idle_timeout() -> None:
    """A peer that gives a connection up after 0.5 s of silence still has it after 2 s
    without sends: the connection writes the empty frames the peer's ``idle-time-out`` asks for."""
    with AmqpPeer(lambda n: "accept", idle_timeout=0.5) as peer:
        connection = await AmqpConnection(peer.url, None).open(10.0)
        settings = _settings(peer.url)
        try:
            await connection.send(settings, amqp_binding.to_binary(make_event()), 10.0)
            await asyncio.sleep(2.0)
            await connection.send(settings, amqp_binding.to_binary(make_event()), 10.0)
            assert not connection.broken
        finally:
            await connection.close()
    assert peer.received == ["accept", "accept"]


async def test_amqps_to_a_peer_without_tls_fails_as_unreachable() -> None:
    """``amqps`` puts proton's TLS layer on the connection: against a peer that does not speak
    TLS, the open fails as unreachable (retryable), not as a refusal of the credentials."""
    with AmqpPeer(lambda n: "accept") as peer, pytest.raises(TargetUnreachable):
        await AmqpConnection(peer.url.replace("amqp://", "amqps://"), None).open(5.0)


async def test_a_cancelled_send_leaves_the_others_their_outcomes() -> None:
    """A send cancelled while it waits (its delivery given up by the pipeline) does not take the
    others' outcomes with it: those sent after it are done when the peer settles them."""
    with AmqpPeer(lambda n: "hold" if n == 0 else "accept") as peer:
        connection = await AmqpConnection(peer.url, None).open(10.0)
        settings = _settings(peer.url)
        try:
            first = asyncio.ensure_future(
                connection.send(settings, amqp_binding.to_binary(make_event()), 10.0)
            )
            await asyncio.sleep(0)
            first.cancel()
            async with asyncio.timeout(5.0):
                await asyncio.gather(
                    *(connection.send(settings, amqp_binding.to_binary(make_event()), 10.0) for _ in range(4))
                )
            assert first.cancelled()
            assert not connection.broken
        finally:
            await connection.close()


def test_deliveries_through_protons_c_api_are_the_links_own() -> None:
    """The deliveries made through proton's C API are the link's: each one ended by the
    advance, held until the peer's credit comes, without an outcome until the peer settles it,
    and no longer the link's unsettled once settled on our side."""
    connection = Connection()
    Transport().bind(connection)
    link = connection.session().sender("s")
    started = []
    for n in range(3):
        delivery = deliveries.start(link, str(n + 1))
        link.stream(f"message {n}".encode())
        deliveries.advance(link)
        started.append(delivery)
    assert link.queued == 3  # (no credit yet: proton holds them, in order)
    assert link.unsettled == 3
    assert [deliveries.settled(d) for d in started] == [False] * 3
    assert [deliveries.remote_state(d) for d in started] == [0] * 3
    assert link.current is None  # (every one advanced)
    deliveries.settle(started[0])
    assert link.unsettled == 2


@pytest.fixture
def certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A self-signed certificate for ``localhost`` (and 127.0.0.1), trusted by TLS clients made
    from now on through ``SSL_CERT_FILE`` (OpenSSL's default verify paths)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    return cert, key


async def test_amqps_checks_the_peers_certificate_against_the_sinks_name(
    certificate: tuple[Path, Path],
) -> None:
    """``amqps`` to the checked address keeps the sink's name for TLS: a certificate for that
    name is accepted and messages are delivered; one for another name is refused (unreachable)."""
    with AmqpPeer(lambda n: "accept", tls=certificate) as peer:
        url = peer.url.replace("amqp://", "amqps://")
        connection = await AmqpConnection(url, None, virtual_host="localhost").open(10.0)
        try:
            await connection.send(_settings(peer.url), amqp_binding.to_binary(make_event()), 10.0)
        finally:
            await connection.close()
        with pytest.raises(TargetUnreachable):
            await AmqpConnection(url, None, virtual_host="other.example").open(10.0)
    assert peer.received == ["accept"]

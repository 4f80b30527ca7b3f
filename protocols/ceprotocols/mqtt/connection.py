"""One paho-mqtt client bridged to asyncio.

paho reports through callbacks (callback API version 2), from the event loop itself when the
loop drives its socket (senders: :class:`~ceprotocols.mqtt.network.LoopNetwork`) or from paho's
network thread (receivers, whose message handler may block). This class turns those callbacks
into asyncio futures resolved on the owning event loop: a connect future, one future per
in-flight PUBLISH (resolved on PUBACK for QoS 1, PUBCOMP for QoS 2, on write for QoS 0) and one
per SUBSCRIBE. When the connection drops, every pending publish fails with TargetUnreachable and
the client reconnects.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from ceprotocols.credentials import AccessToken, Credential, Plain
from ceprotocols.egress import ConnectGuard
from ceprotocols.errors import (
    DeliveryError,
    DeliveryRejected,
    DeliveryTimeout,
    DestinationRefused,
    TargetUnreachable,
)
from ceprotocols.mqtt.binding import MqttMessage
from ceprotocols.mqtt.checked import CheckedClient
from ceprotocols.mqtt.network import LoopNetwork, Network, ThreadedNetwork
from ceprotocols.mqtt.properties import publish_properties

_EARLY_LIMIT = 10_000
#: paho's property set (its constructor has no type annotations).
_connect_properties: Callable[[int], Any] = Properties


#: Called in paho's thread for each received PUBLISH.
MessageHandler = Callable[[paho.MQTTMessage], None]


class MqttConnection:
    """A connected MQTT 3.1.1 or 5 client. Create with :meth:`open`; all methods are called
    from the event loop that opened it. With ``on_message`` the client keeps paho's network
    thread and the handler runs there (it may block, for back pressure); without, the event
    loop drives the socket. A restricted ``guard`` (senders only, so no ``on_message``) makes
    every connect and reconnect go to a checked address; once one is refused the connection
    is done: every waiting and later publish fails with :class:`DestinationRefused`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        v5: bool,
        credential: Credential | None = None,
        tls: bool = False,
        on_message: MessageHandler | None = None,
        manual_ack: bool = False,
        client_id: str | None = None,
        websocket_path: str | None = None,
        guard: ConnectGuard | None = None,
        session_expiry: int | None = None,
    ) -> None:
        self.host, self.port, self.v5 = host, port, v5
        self._loop = asyncio.get_running_loop()
        # A persistent session (``session_expiry`` set, with a fixed ``client_id``): the server
        # keeps the subscriptions and the QoS 1/2 messages published while the client is away.
        # MQTT 5 says how long (Session Expiry Interval); MQTT 3.1.1 keeps it until a clean
        # connect (clean_session false).
        persistent = session_expiry is not None
        self._connect_options: dict[str, Any] = {}
        if persistent and v5:
            properties = _connect_properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = session_expiry
            self._connect_options = {"clean_start": False, "properties": properties}
        options: dict[str, Any] = {
            "client_id": client_id or f"cebroker-{uuid.uuid4().hex[:12]}",
            "protocol": paho.MQTTv5 if v5 else paho.MQTTv311,
            "manual_ack": manual_ack,
            "transport": "websockets" if websocket_path is not None else "tcp",
        }
        if persistent and not v5:
            options["clean_session"] = False
        self._client: paho.Client
        if guard is not None and guard.restricted:
            if on_message is not None:  # paho's own thread would not stop on a refusal
                raise ValueError("a network guard is for senders: it cannot be used with on_message")
            self._client = CheckedClient(CallbackAPIVersion.VERSION2, guard=guard, loop=self._loop, **options)
        else:
            self._client = paho.Client(CallbackAPIVersion.VERSION2, **options)
        if websocket_path is not None:
            self._client.ws_set_options(path=websocket_path)
        if isinstance(credential, Plain):
            self._client.username_pw_set(credential.identifier, credential.secret)
        elif isinstance(credential, AccessToken):
            self._client.username_pw_set(credential.token_type, credential.token)
        if tls:
            self._client.tls_set()
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_publish = self._on_publish
        self._client.on_subscribe = self._on_subscribe
        if on_message is not None:
            self._client.on_message = lambda _client, _userdata, message: on_message(message)
        self._network: Network = (
            ThreadedNetwork(self._client, self._loop)
            if on_message is not None
            else LoopNetwork(self._client, self._loop, on_refused=self._on_refused)
        )
        # Guards the mid tables against paho's thread (ThreadedNetwork), which may confirm a
        # publish before publish() has returned its mid.
        self._lock = threading.Lock()
        self._pending: dict[int, asyncio.Future[None]] = {}
        self._early: dict[int, Any] = {}
        self._abandoned: set[int] = set()
        self._acked: list[tuple[asyncio.Future[None], Any]] = []
        self._wake_pending = False
        self._subscribing: dict[int, asyncio.Future[list[Any]]] = {}
        self._early_subacks: dict[int, list[Any]] = {}
        self._connected = asyncio.Event()
        self._refusal: str | None = None
        self._refused = asyncio.Event()
        self._first_connect: asyncio.Future[None] = self._loop.create_future()
        self._closed = False
        self.subscriptions: list[tuple[str, int]] = []

    # -- lifecycle --------------------------------------------------------------------------------

    async def open(self, within: float) -> MqttConnection:
        """Connect, waiting at most ``within`` seconds for CONNACK."""
        try:
            self._network.start(self.host, self.port, keepalive=30, options=self._connect_options)
            await asyncio.wait_for(asyncio.shield(self._first_connect), within)
        except TimeoutError:
            await self.close()
            raise TargetUnreachable(
                f"MQTT broker {self.host}:{self.port} did not accept a connection"
            ) from None
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        """Disconnect and stop the network IO."""
        if self._closed:
            return
        self._closed = True
        await self._network.stop()
        self._fail_pending(TargetUnreachable("MQTT connection closed"))

    @property
    def connected(self) -> bool:
        """Whether the client is connected right now."""
        return self._connected.is_set()

    async def wait_connected(self, within: float) -> None:
        """Wait until (re)connected; TargetUnreachable if not within ``within`` seconds,
        DestinationRefused once the network policy refused the broker's address."""
        if self._closed:
            raise TargetUnreachable("MQTT connection closed")
        self._raise_refusal()
        if self._connected.is_set():
            return
        waits = [asyncio.ensure_future(self._connected.wait()), asyncio.ensure_future(self._refused.wait())]
        try:
            done, _ = await asyncio.wait(waits, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        self._raise_refusal()
        if not done:
            raise TargetUnreachable(f"MQTT broker {self.host}:{self.port} is not connected")

    def _raise_refusal(self) -> None:
        if self._refusal is not None:
            raise DestinationRefused(self._refusal)

    def _on_refused(self, refusal: DestinationRefused) -> None:
        """The network policy refused the broker's address (event loop): end this connection."""
        self._refusal = str(refusal)
        self._refused.set()
        if not self._first_connect.done():
            self._first_connect.set_exception(DestinationRefused(self._refusal))
        self._fail_pending(DestinationRefused(self._refusal))

    # -- publish ----------------------------------------------------------------------------------

    async def publish(
        self,
        topic: str,
        message: MqttMessage,
        *,
        qos: int,
        retain: bool = False,
        expiry: int | None = None,
        within: float,
    ) -> None:
        """Publish and return when the broker confirmed it (PUBACK for QoS 1, PUBCOMP for QoS 2)."""
        if self._closed or self._refusal is not None or not self._connected.is_set():
            await self.wait_connected(within)
        properties = publish_properties(message, expiry) if self.v5 else None
        future: asyncio.Future[None] = self._loop.create_future()
        # Never hold our lock while calling into paho: paho calls on_publish while holding its own
        # message lock, so holding ours around publish() could deadlock the two threads.
        info = self._client.publish(topic, message.payload, qos=qos, retain=retain, properties=properties)
        if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_QUEUE_SIZE):
            if info.rc == MQTTErrorCode.MQTT_ERR_NO_CONN:
                raise TargetUnreachable(f"MQTT broker {self.host}:{self.port} is not connected")
            raise DeliveryRejected(
                f"MQTT publish refused locally: {paho.error_string(info.rc)}", retryable=True
            )
        with self._lock:
            if info.mid in self._early:  # confirmed before we got here
                self._settle(future, self._early.pop(info.mid))
            else:
                self._pending[info.mid] = future
        # One timer handle per publish (asyncio.timeout costs a context object and a reschedule).
        timer = self._loop.call_at(self._loop.time() + within, self._expire, future, info.mid, within)
        try:
            await future
        finally:
            timer.cancel()

    def _expire(self, future: asyncio.Future[None], mid: int, within: float) -> None:
        """No acknowledgement within the delivery's time: fail it, and forget its packet id."""
        if future.done():
            return
        with self._lock:
            if self._pending.pop(mid, None) is not None:
                self._abandon(mid)
        future.set_exception(
            DeliveryTimeout(f"no MQTT acknowledgement from {self.host}:{self.port} within {within}s")
        )

    # -- subscribe (receivers) ----------------------------------------------------------------------

    async def subscribe(self, topic: str, qos: int, within: float) -> None:
        """Subscribe (and re-subscribe after every reconnect); raises if the broker refuses."""
        self.subscriptions.append((topic, qos))
        await self.wait_connected(within)
        await self._subscribe_now(topic, qos, within)

    async def _subscribe_now(self, topic: str, qos: int, within: float) -> None:
        future: asyncio.Future[list[Any]] = self._loop.create_future()
        rc, mid = self._client.subscribe(topic, qos=qos)
        if rc != MQTTErrorCode.MQTT_ERR_SUCCESS or mid is None:
            raise TargetUnreachable(f"MQTT subscribe to {topic!r} failed: {paho.error_string(rc)}")
        with self._lock:
            if mid in self._early_subacks:
                _resolve(future, self._early_subacks.pop(mid))
            else:
                self._subscribing[mid] = future
        codes = await asyncio.wait_for(future, within)
        if any(getattr(code, "is_failure", False) for code in codes):
            raise DeliveryRejected(f"MQTT broker refused the subscription to {topic!r}: {codes}")

    def ack(self, mid: int, qos: int) -> None:
        """Acknowledge a received QoS 1/2 message (manual-ack clients)."""
        self._client.ack(mid, qos)

    # -- paho callbacks (paho's thread or the event loop, see Network.call) ------------------

    def _on_connect(self, client: paho.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        self._network.call(self._connected_changed, reason)

    def _connected_changed(self, reason: Any) -> None:
        if reason.is_failure:
            error: DeliveryError = TargetUnreachable(
                f"MQTT broker {self.host}:{self.port} refused the connection: {reason}"
            )
            if "authori" in str(reason).lower() or "password" in str(reason).lower():
                error = DeliveryRejected(f"MQTT broker refused the credentials: {reason}", status=str(reason))
            if not self._first_connect.done():
                self._first_connect.set_exception(error)
            return
        self._connected.set()
        if not self._first_connect.done():
            self._first_connect.set_result(None)
        elif self.subscriptions:  # a reconnect: a clean session has forgotten our subscriptions
            for topic, qos in self.subscriptions:
                self._client.subscribe(topic, qos=qos)

    def _on_disconnect(self, client: paho.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        self._network.call(self._disconnected, reason)

    def _disconnected(self, reason: Any) -> None:
        self._connected.clear()
        if not self._closed:
            self._network.lost()
        self._fail_pending(TargetUnreachable(f"MQTT connection to {self.host}:{self.port} lost: {reason}"))

    def _on_publish(self, client: paho.Client, userdata: Any, mid: int, reason: Any, props: Any) -> None:
        with self._lock:
            future = self._pending.pop(mid, None)
            if future is None:
                if mid in self._abandoned:  # a late acknowledgement of a failed delivery
                    self._abandoned.discard(mid)
                    return
                # publish() has not registered the mid yet.
                if len(self._early) > _EARLY_LIMIT:
                    self._early.clear()
                self._early[mid] = reason
                return
            # Acknowledgements arrive in bursts: wake the event loop once per burst, not per ack.
            self._acked.append((future, reason))
            if self._wake_pending:
                return
            self._wake_pending = True
        self._network.call(self._settle_acked)

    def _settle_acked(self) -> None:
        with self._lock:
            acked, self._acked = self._acked, []
            self._wake_pending = False
        for future, reason in acked:
            self._settle(future, reason)

    def _on_subscribe(self, client: paho.Client, userdata: Any, mid: int, codes: Any, props: Any) -> None:
        with self._lock:
            future = self._subscribing.pop(mid, None)
            if future is None:
                self._early_subacks[mid] = list(codes)
                return
        self._network.call(_resolve, future, list(codes))

    def _settle(self, future: asyncio.Future[None], reason: Any) -> None:
        if future.done():
            return
        if reason is not None and getattr(reason, "is_failure", False):
            future.set_exception(
                DeliveryRejected(
                    f"MQTT broker rejected the message: {reason}", status=str(reason), body=str(reason)
                )
            )
        else:
            future.set_result(None)

    def _abandon(self, mid: int) -> None:
        # Called with the lock held. Remember the mid so that a late acknowledgement is not taken
        # for the confirmation of a later publish that reuses the (16-bit) packet id.
        if len(self._abandoned) > _EARLY_LIMIT:
            self._abandoned.clear()
        self._abandoned.add(mid)

    def _fail_pending(self, error: Exception) -> None:
        with self._lock:
            for mid in self._pending:
                self._abandon(mid)
            pending, self._pending = list(self._pending.values()), {}
            self._early.clear()
        for future in pending:
            if not future.done():
                future.set_exception(error)


def _resolve(future: asyncio.Future[list[Any]], value: list[Any]) -> None:
    if not future.done():
        future.set_result(value)

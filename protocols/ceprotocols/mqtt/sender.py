"""MQTT 3.1.1 (``MQTT3``) and MQTT 5 (``MQTT5``) delivery with paho-mqtt.

Sink: ``mqtt://host[:1883]`` or ``mqtts://host[:8883]``; ``ws://host[:80][/path]`` and
``wss://`` speak MQTT over WebSocket (path default ``/mqtt``). Settings (Subscriptions API 3.2.5.2):
``topicname`` (required), ``qos`` (0, 1, 2; default 1), ``retain`` (default false), and for MQTT 5
``expiry`` (seconds) and ``userproperties`` (map); ``contentmode`` ``binary`` (default, MQTT 5
only) or ``structured`` (the only mode of MQTT 3.1.1). A delivery completes on PUBACK (QoS 1) or
PUBCOMP (QoS 2); QoS 0 completes once written.
"""

from __future__ import annotations

from ceprotocols.credentials import Credential, ensure_fresh, parse_credential
from ceprotocols.egress import ConnectGuard, NetworkPolicy, Resolver, system_resolver
from ceprotocols.endpoint import TLS_SCHEMES, sink_endpoint
from ceprotocols.errors import (
    INVALID_EVENT,
    INVALID_SETTINGS,
    DeliveryError,
    DeliveryRejected,
    DestinationRefused,
)
from ceprotocols.mqtt import binding
from ceprotocols.mqtt.connection import MqttConnection
from ceprotocols.mqtt.settings import SCHEMES, WEBSOCKET_SCHEMES, MqttSettings, parse_settings
from ceprotocols.pool import ConnectionPool
from ceprotocols.prepared import PreparedCache
from ceprotocols.sender import Destination, Event
from ceprotocols.tracecontext import TraceContext, mqtt_user_properties

_Key = tuple[str, str, int, str | None, Credential | None]


class MqttSender:
    """Delivers events to MQTT brokers; one connection per (broker, credentials), shared.

    Args:
        v5: MQTT 5 (``MQTT5``) rather than 3.1.1 (``MQTT3``).
        policy: the addresses brokers may have, checked on every connect and reconnect on the
            address connected to (see :mod:`ceprotocols.mqtt.checked`); ``None`` means
            :meth:`NetworkPolicy.unrestricted`.
        resolver: how broker names are resolved when the policy is restricted.
    """

    def __init__(
        self, *, v5: bool, policy: NetworkPolicy | None = None, resolver: Resolver = system_resolver
    ) -> None:
        self.v5 = v5
        self._guard = ConnectGuard(policy or NetworkPolicy.unrestricted(), resolver)
        self.protocol = "MQTT5" if v5 else "MQTT3"
        self._pool: ConnectionPool[_Key, MqttConnection] = ConnectionPool(self._close)
        self._prepared = PreparedCache(self._prepare)

    @property
    def connections(self) -> int:
        """How many broker connections are open (for tests and metrics)."""
        return len(self._pool)

    def _prepare(self, destination: Destination) -> tuple[_Key, MqttSettings]:
        endpoint = sink_endpoint(destination.sink, schemes=SCHEMES)
        with INVALID_SETTINGS:
            settings = parse_settings(destination.settings, v5=self.v5)
            credential = parse_credential(destination.credential, protocol=self.protocol)
        websocket_path = (endpoint.path or "/mqtt") if endpoint.scheme in WEBSOCKET_SCHEMES else None
        return (endpoint.scheme, endpoint.host, endpoint.port, websocket_path, credential), settings

    async def deliver(
        self, event: Event, destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        """Publish ``event`` and return once the broker confirmed it (see the module doc)."""
        key, settings = self._prepared.get(destination)
        ensure_fresh(key[-1])
        with INVALID_EVENT:
            if settings.structured:
                message = binding.to_structured(event, v5=self.v5)
                if settings.user_properties:
                    message = binding.MqttMessage(
                        message.payload, message.content_type, settings.user_properties
                    )
            else:
                message = binding.to_binary(event, extra=settings.user_properties)
            if trace is not None and self.v5:  # MQTT 3.1.1 has no user properties
                message = binding.MqttMessage(
                    message.payload,
                    message.content_type,
                    mqtt_user_properties(trace, message.user_properties),
                )
        connection = await self._pool.get(key, lambda: self._open(key, destination.timeout))
        try:
            with INVALID_EVENT:  # a property value MQTT cannot carry
                await connection.publish(
                    settings.topic,
                    message,
                    qos=settings.qos,
                    retain=settings.retain,
                    expiry=settings.expiry,
                    within=destination.timeout,
                )
        except DestinationRefused:
            await self._pool.discard(key, connection)  # the next delivery resolves and checks anew
            raise
        except DeliveryError:
            raise
        except (OSError, ValueError, RuntimeError) as exc:  # paho raises these for socket/packet trouble
            await self._pool.discard(key, connection)
            raise DeliveryRejected(f"MQTT publish failed: {exc}", retryable=True) from exc

    async def _open(self, key: _Key, within: float) -> MqttConnection:
        scheme, host, port, websocket_path, credential = key
        connection = MqttConnection(
            host,
            port,
            v5=self.v5,
            credential=credential,
            tls=scheme in TLS_SCHEMES,
            websocket_path=websocket_path,
            guard=self._guard,
        )
        return await connection.open(within)

    @staticmethod
    async def _close(connection: MqttConnection) -> None:
        await connection.close()

    async def aclose(self) -> None:
        """Disconnect from every broker."""
        await self._pool.aclose()

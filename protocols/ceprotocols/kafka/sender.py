"""Kafka delivery with confluent-kafka.

Sink: ``kafka://host:port[,host:port...][/topic]``. Settings (Subscriptions API 3.2.5.4):
``topicname``, ``partitionkeyextractor``, ``clientid``, ``acks``, and ``contentmode``. A delivery
completes on the record's delivery report (with ``acks=all``, once every in-sync replica has it).
"""

from __future__ import annotations

from ceprotocols.credentials import Credential, ensure_fresh, parse_credential
from ceprotocols.egress import ConnectGuard, NetworkPolicy, Resolver, system_resolver
from ceprotocols.endpoint import Endpoint, redact, sink_endpoint
from ceprotocols.errors import INVALID_EVENT, INVALID_SETTINGS, DestinationRefused
from ceprotocols.kafka import binding
from ceprotocols.kafka.binding import KafkaRecord
from ceprotocols.kafka.client import client_config
from ceprotocols.kafka.producer import KafkaProducer
from ceprotocols.kafka.settings import SCHEMES, KafkaSettings, parse_settings
from ceprotocols.pool import ConnectionPool
from ceprotocols.prepared import PreparedCache
from ceprotocols.sender import Destination, Event
from ceprotocols.tracecontext import TraceContext

_Key = tuple[tuple[tuple[str, int], ...], bool, Credential | None, str | None, str, int]
#: A destination as each delivery needs it (made once): the sink, settings and credential, the
#: producer's key (its ``message.timeout.ms`` last) and the sink for messages (no secrets).
_Prepared = tuple[Endpoint, KafkaSettings, Credential | None, _Key, str]


class KafkaSender:
    """Delivers events to Kafka; one producer per (cluster, credentials, client id, acks).

    Args:
        policy: the addresses the cluster's brokers may have. With a restricted policy the
            bootstrap servers are resolved and checked before the producer exists (and, without
            TLS, given to librdkafka as the checked addresses), and the brokers the cluster
            advertises are checked before the first record and again every
            :data:`~ceprotocols.kafka.producer.BROKER_CHECK_INTERVAL` seconds (see
            docs/protocols.md for the window that leaves); ``None`` means
            :meth:`NetworkPolicy.unrestricted`.
        resolver: how host names are resolved when the policy is restricted.
    """

    def __init__(self, *, policy: NetworkPolicy | None = None, resolver: Resolver = system_resolver) -> None:
        self._guard = ConnectGuard(policy or NetworkPolicy.unrestricted(), resolver)
        self._prepared = PreparedCache(self._prepare)
        self._pool: ConnectionPool[_Key, KafkaProducer] = ConnectionPool(self._close)

    @property
    def connections(self) -> int:
        """How many producers are open."""
        return len(self._pool)

    def _prepare(self, destination: Destination) -> _Prepared:
        endpoint = sink_endpoint(destination.sink, schemes=SCHEMES)
        with INVALID_SETTINGS:
            settings = parse_settings(destination.settings, endpoint)
            credential = parse_credential(destination.credential, protocol="KAFKA")
        timeout_ms = max(1000, int(destination.timeout * 1000))
        key: _Key = (endpoint.hosts, endpoint.tls, credential, settings.client_id, settings.acks, timeout_ms)
        where = f"Kafka {redact(destination.sink)}"  # no token or password
        return endpoint, settings, credential, key, where

    async def deliver(
        self, event: Event, destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        """Produce ``event`` and return once its delivery report arrived (see the module doc)."""
        endpoint, settings, credential, key, where = self._prepared.get(destination)
        ensure_fresh(credential)
        with INVALID_EVENT:
            encode = binding.to_structured if settings.structured else binding.to_binary
            record = encode(event, key_attribute=settings.key_attribute)
        if trace is not None:
            pairs = tuple((name, value.encode()) for name, value in trace.pairs())
            record = KafkaRecord(headers=record.headers + pairs, key=record.key, value=record.value)
        # An open producer is taken without an await (and without making the opener).
        producer = self._pool.held(key) or await self._pool.get(
            key, lambda: self._open(endpoint, settings, credential, key[-1], where)
        )
        if self._guard.restricted and producer.brokers_due():
            try:
                await producer.check_brokers(self._guard, settings.topic, destination.timeout)
            except DestinationRefused:
                await self._pool.discard(key, producer)  # the next delivery starts from bootstrap
                raise
        await producer.produce(settings.topic, record, destination.timeout + 1.0)

    async def _open(
        self,
        endpoint: Endpoint,
        settings: KafkaSettings,
        credential: Credential | None,
        timeout_ms: int,
        where: str,
    ) -> KafkaProducer:
        config = client_config(endpoint, credential)
        if self._guard.restricted:
            config["bootstrap.servers"] = await self._bootstrap(endpoint)
        config.update({"acks": settings.acks, "message.timeout.ms": timeout_ms, "linger.ms": 2})
        if settings.client_id:
            config["client.id"] = settings.client_id
        return KafkaProducer(config, where=where)

    async def _bootstrap(self, endpoint: Endpoint) -> str:
        """``bootstrap.servers`` with every host checked: the checked addresses themselves
        without TLS, the names with TLS (librdkafka verifies the certificate against the name it
        connects to and cannot be given another)."""
        servers: list[str] = []
        for host, port in endpoint.hosts:
            addresses = await self._guard.addresses(host, port, role="Kafka bootstrap server")
            if endpoint.tls:
                servers.append(f"{host}:{port}")
            else:
                servers += [f"[{a}]:{port}" if a.version == 6 else f"{a}:{port}" for a in addresses]
        return ",".join(servers)

    @staticmethod
    async def _close(producer: KafkaProducer) -> None:
        await producer.close()

    async def aclose(self) -> None:
        """Flush and close every producer."""
        await self._pool.aclose()

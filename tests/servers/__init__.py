"""Real servers for tests: mosquitto, nats-server, RabbitMQ (AMQP 1.0), tansu (Kafka protocol) and
PostgreSQL.

Each server runs as a child process bound to 127.0.0.1 on free ports, in its own temporary
directory, and can be stopped and restarted on the same ports (for resilience tests). The pytest
fixtures that start them live in :mod:`servers.fixtures`, registered for the whole suite by
``tests/conftest.py``. A missing server binary fails the test with the command that installs it.
"""

from servers.base import CLOSED_PORT, ServerError, ServerProcess, free_port
from servers.mosquitto import MosquittoServer
from servers.nats import NatsServer
from servers.postgres import PostgresServer
from servers.rabbitmq import RabbitMQServer
from servers.tansu import TansuServer

__all__ = [
    "CLOSED_PORT",
    "MosquittoServer",
    "NatsServer",
    "PostgresServer",
    "RabbitMQServer",
    "ServerError",
    "ServerProcess",
    "TansuServer",
    "free_port",
]

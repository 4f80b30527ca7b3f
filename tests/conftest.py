"""Shared fixtures for the whole suite."""

#: Real-server fixtures (mosquitto, nats-server, RabbitMQ, tansu): see tests/servers/.
#: A recording sink, brokers in threads and ``cebroker serve`` processes: see tests/support/.
pytest_plugins = ["servers.fixtures", "support.fixtures"]

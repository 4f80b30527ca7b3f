"""Shared fixtures for the whole suite."""

#: Real-server fixtures (mosquitto, nats-server, RabbitMQ, tansu): see tests/servers/.
pytest_plugins = ["servers.fixtures"]

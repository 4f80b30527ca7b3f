"""Shared fixtures for the whole suite."""

#: Real-server fixtures (mosquitto, nats-server, RabbitMQ, tansu): see tests/servers/.
#: A recording sink, brokers in threads and ``cebroker serve`` processes: see tests/support/.
#: The lanes' markers (postgres, spark, browser, container): see tests/support/lanes.py.
pytest_plugins = ["support.lanes", "servers.fixtures", "support.fixtures"]

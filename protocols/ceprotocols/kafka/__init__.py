"""Apache Kafka: binding (pure), sender (confluent-kafka) and receiver. Importing this package
needs no client library; the sender and receiver modules need ``ceprotocols[kafka]``."""

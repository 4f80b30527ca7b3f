"""AMQP 1.0: binding (pure), sender (python-qpid-proton) and receiver. Importing this package
needs no client library; the sender and receiver modules need ``ceprotocols[amqp]``."""

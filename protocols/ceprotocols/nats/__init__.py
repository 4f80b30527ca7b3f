"""NATS: binding (pure), sender (nats-py) and receiver. Importing this package needs no client
library; the sender and receiver modules need ``ceprotocols[nats]``."""

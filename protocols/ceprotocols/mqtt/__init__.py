"""MQTT 3.1.1 and 5: binding (pure), sender (paho-mqtt) and receiver. Importing this package
needs no client library; the sender and receiver modules need ``ceprotocols[mqtt]``."""

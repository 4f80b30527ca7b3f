"""The dispatcher delivers through the sender registry for every protocol, not only HTTP:
an MQTT 5 subscription receives events from ``POST /events`` with the same pipeline (issue
"Matching and dispatch"; MQTT Protocol Binding 1.0 for the wire form, checked by ceprotocols)."""

from __future__ import annotations

import json
import threading

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from servers.mosquitto import MosquittoServer
from support.broker import Broker
from support.events import event


@pytest.mark.mqtt
def test_mqtt5_subscription_gets_events(broker: Broker, mosquitto: MosquittoServer) -> None:
    got: list[mqtt.MQTTMessage] = []
    arrived = threading.Event()
    ready = threading.Event()
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)

    def on_connect(c: mqtt.Client, userdata: object, flags: object, reason: object, props: object) -> None:
        c.subscribe("pipeline/orders", qos=1)

    def on_subscribe(*args: object) -> None:
        ready.set()

    def on_message(c: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
        got.append(message)
        arrived.set()

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    client.connect("127.0.0.1", mosquitto.port)
    client.loop_start()
    try:
        assert ready.wait(10)
        broker.subscribe(
            f"mqtt://127.0.0.1:{mosquitto.port}",
            protocol="MQTT5",
            protocolsettings={"topicname": "pipeline/orders", "qos": 1},
            types=["com.example.test"],
        )
        assert broker.send(event(42)).status_code == 202
        assert arrived.wait(15)
    finally:
        client.loop_stop()
        client.disconnect()
    (message,) = got
    assert json.loads(message.payload) == {"n": 42}
    assert message.properties is not None
    props = dict(vars(message.properties)["UserProperty"])  # paho sets each property by name
    assert props["id"] == "e-42"
    assert props["source"] == "/tests"

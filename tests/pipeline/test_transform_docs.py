"""The examples of docs/transformations.md are true: each ``cel`` block, run on the document's
sample event for a subscription of the protocol it names, has the outcome the ``json outcome``
block after it shows (through the preview the explain route answers with); the subscription
example compiles."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cebroker.pipeline.transform import transform_problems
from cebroker.pipeline.transform.preview import preview
from cebroker.subscription import Subscription

DOC = Path(__file__).resolve().parents[2] / "docs" / "transformations.md"
_FENCE = re.compile(r"```(?P<lang>\w*)(?: (?P<tag>\w+))?\n(?P<text>.*?)```", re.DOTALL)

#: A subscription of each protocol the examples name.
SUBSCRIPTIONS = {
    "HTTP": ("https://partner.example/hooks", {}),
    "KAFKA": ("kafka://kafka.example:9092", {"topicname": "orders"}),
    "MQTT5": ("mqtt://mqtt.example:1883", {"topicname": "orders"}),
    "NATS": ("nats://nats.example:4222", {"subject": "orders"}),
    "AMQP": ("amqp://amqp.example:5672", {"address": "/queue/orders"}),
}


def blocks() -> list[re.Match[str]]:
    return list(_FENCE.finditer(DOC.read_text()))


def sample() -> dict[str, Any]:
    (found,) = [b for b in blocks() if b["lang"] == "json" and b["tag"] == "sample"]
    return dict(json.loads(found["text"]))


def examples() -> list[Any]:
    found = blocks()
    pairs = [
        (block, after)
        for block, after in zip(found, found[1:], strict=False)
        if block["lang"] == "cel" and after["lang"] == "json" and after["tag"] == "outcome"
    ]
    return [
        pytest.param(b["tag"], b["text"], json.loads(a["text"]), id=f"{n}-{b['tag']}")
        for n, (b, a) in enumerate(pairs)
    ]


def test_every_cel_block_has_its_outcome() -> None:
    assert len(examples()) == len([b for b in blocks() if b["lang"] == "cel"]) == 6


@pytest.mark.parametrize(("protocol", "expression", "outcome"), examples())
def test_example(protocol: str, expression: str, outcome: dict[str, Any]) -> None:
    sink, settings = SUBSCRIPTIONS[protocol]
    subscription = Subscription(
        id="doc",
        protocol=protocol,
        sink=sink,
        protocolsettings=settings,
        config={"transform": {"cel": expression}},
    )
    shown = preview(subscription, sample())
    assert shown is not None
    assert {key: shown[key] for key in outcome} == outcome


def test_the_subscription_example_compiles() -> None:
    first = next(b for b in blocks() if b["lang"] == "json")
    config = json.loads(first["text"])["config"]
    assert transform_problems(config["transform"]) == []

"""The shared credential accessor (Subscriptions API 3.2.3 ``sinkcredential``): ``identity`` is
read as ``identifier`` and ``refreshtokenurl`` as ``refreshtokenendpoint``, by every reader."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import pytest
from ceprotocols.credentials import CREDENTIAL_ALIASES, Plain, canonical_credential, parse_credential
from ceprotocols.errors import DeliveryRejected
from ceprotocols.http.credentials import CredentialResolver
from ceprotocols.http.transport import HttpTransport
from ceprotocols.registry import create_sender
from ceprotocols.sender import Destination
from servers import NatsServer

from protocols.ce_samples import make_event
from protocols.harness import unique_name


def test_aliases_read_under_canonical_names() -> None:
    """Each alias is read under the spec's name; other fields pass through unchanged."""
    given = {"credentialtype": "PLAIN", "identity": "svc", "secret": "s"}
    assert dict(canonical_credential(given)) == {
        "credentialtype": "PLAIN",
        "identifier": "svc",
        "secret": "s",
    }
    refresh = {"credentialtype": "REFRESHTOKEN", "refreshtoken": "r", "refreshtokenurl": "http://a/t"}
    assert dict(canonical_credential(refresh)) == {
        "credentialtype": "REFRESHTOKEN",
        "refreshtoken": "r",
        "refreshtokenendpoint": "http://a/t",
    }
    assert given == {"credentialtype": "PLAIN", "identity": "svc", "secret": "s"}  # input untouched


def test_canonical_input_is_returned_without_copy() -> None:
    """The delivery path's common case (spec names) costs no copy."""
    given = {"credentialtype": "PLAIN", "identifier": "svc", "secret": "s"}
    assert canonical_credential(given) is given


def test_canonical_name_wins_when_both_are_present() -> None:
    """The API refuses both at once; should a stored document hold both, the spec's name wins."""
    both = {"credentialtype": "PLAIN", "identity": "alias", "identifier": "spec", "secret": "s"}
    assert canonical_credential(both)["identifier"] == "spec"
    reversed_order = {"credentialtype": "PLAIN", "identifier": "spec", "identity": "alias", "secret": "s"}
    assert canonical_credential(reversed_order)["identifier"] == "spec"


def test_result_is_read_only() -> None:
    """Readers share one view of a stored credential: it must refuse writes."""
    view = canonical_credential({"credentialtype": "PLAIN", "identity": "svc", "secret": "s"})
    assert not isinstance(view, MutableMapping)


def test_alias_table_names_the_two_fields() -> None:
    assert dict(CREDENTIAL_ALIASES) == {"identity": "identifier", "refreshtokenurl": "refreshtokenendpoint"}


@pytest.mark.parametrize("field", ["identifier", "identity"])
def test_parse_credential_reads_either_spelling(field: str) -> None:
    """PLAIN for MQTT, AMQP, Kafka and NATS: the same user name from either spelling."""
    credential = {"credentialtype": "PLAIN", field: "svc", "secret": "pw"}
    assert parse_credential(credential, protocol="NATS") == Plain("svc", "pw")


def test_parse_credential_without_identifier_is_rejected() -> None:
    with pytest.raises(DeliveryRejected, match="identifier") as caught:
        parse_credential({"credentialtype": "PLAIN", "secret": "pw"}, protocol="NATS")
    assert not caught.value.retryable


async def test_http_basic_is_the_same_for_both_spellings() -> None:
    """PLAIN over HTTP: ``Basic base64(identifier:secret)`` whichever name carries the user."""
    transport = HttpTransport()
    try:
        resolver = CredentialResolver(transport)
        spec = await resolver.authorization({"credentialtype": "PLAIN", "identifier": "svc", "secret": "pw"})
        alias = await resolver.authorization({"credentialtype": "PLAIN", "identity": "svc", "secret": "pw"})
    finally:
        await transport.aclose()
    assert spec == alias == "Basic c3ZjOnB3"


@pytest.mark.nats
async def test_nats_accepts_the_alias_spelling(server_factory: Callable[..., Any]) -> None:
    """A real nats-server with user/password: the ``identity`` spelling logs in as well."""
    server: NatsServer = server_factory(NatsServer, user="bob", password="pw")
    settings = {"subject": unique_name()}
    sender = create_sender("NATS")
    try:
        for field in ("identifier", "identity"):
            credential = {"credentialtype": "PLAIN", field: "bob", "secret": "pw"}
            destination = Destination(
                protocol="NATS", sink=server.url, settings=settings, credential=credential, timeout=5
            )
            await sender.deliver(make_event(), destination)
        wrong = {"credentialtype": "PLAIN", "identity": "bob", "secret": "nope"}
        with pytest.raises(DeliveryRejected):
            await sender.deliver(
                make_event(),
                Destination(protocol="NATS", sink=server.url, settings=settings, credential=wrong, timeout=5),
            )
    finally:
        await sender.aclose()

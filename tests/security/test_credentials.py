"""API keys and OIDC tokens as the authenticator sees them: the keys file (validation, reload on
change, an invalid file keeping the keys in force), and tokens (algorithms, claims, unknown key
ids refetched at a limited pace, the tenant claim)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import httpx
import jwt
import pytest

from cebroker.auth.authenticator import Authenticator
from cebroker.auth.keys import ApiKeyRing, parse_api_keys
from cebroker.auth.oidc import (
    FIRST_BACKOFF,
    MAX_BACKOFF,
    REFETCH_INTERVAL,
    InvalidToken,
    IssuerUnavailable,
    OidcVerifier,
)
from cebroker.errors import ConfigurationError, Unauthorized
from security.support import AUDIENCE, Issuer


def entry(key: str, **extra: object) -> dict[str, object]:
    return {
        "id": "k",
        "sha256": hashlib.sha256(key.encode()).hexdigest(),
        "tenant": "acme",
        "scopes": [],
        **extra,
    }


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({"keys": [entry("a", scopes=["root"])]}, "unknown scope 'root'"),
        ({"keys": [entry("a", tenant=None)]}, "needs a 'tenant' unless it has the admin scope"),
        ({"keys": [entry("a"), entry("b")]}, "the id 'k' is used twice"),
        ({"keys": [entry("a", colour="red")]}, "unknown member 'colour'"),
        ({"keys": {}}, '{"keys": [...]}'),
    ],
)
def test_a_bad_keys_file_names_the_problem(doc: dict[str, object], reason: str) -> None:
    with pytest.raises(ConfigurationError, match="keys.json") as info:
        parse_api_keys(json.dumps(doc), "keys.json")
    assert reason in str(info.value)


def test_keys_are_reloaded_on_change_and_a_bad_file_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [entry("first")]}))
    now = [0.0]
    ring = ApiKeyRing(path, monotonic=lambda: now[0])
    assert ring.find("first") is not None
    assert ring.find("second") is None
    path.write_text(json.dumps({"keys": [entry("second", id="k2")]}))
    assert ring.find("second") is None  # checked at most once a second
    now[0] = 1.5
    assert ring.find("second") is not None
    assert ring.find("first") is None
    path.write_text("{not json")
    now[0] = 3.0
    assert ring.find("second") is not None  # the invalid file is refused; the keys in force stay
    assert not ring.reload()


async def test_the_authorization_header_is_checked() -> None:
    authenticator = Authenticator(keys=None, oidc=None)
    assert (await authenticator.authenticate(None)).admin  # no authentication configured
    path_less = Authenticator(keys=_ring_of("k1"))
    for header in (None, "", "Basic dTpw", "Bearer", "Bearer nope"):
        with pytest.raises(Unauthorized) as info:
            await path_less.authenticate(header)
        assert info.value.headers is not None
        assert info.value.headers["WWW-Authenticate"].startswith('Bearer realm="cebroker"')
    assert (await path_less.authenticate("Bearer k1")).tenant == "acme"


def _ring_of(key: str) -> ApiKeyRing:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "keys.json"
    path.write_text(json.dumps({"keys": [entry(key)]}))
    return ApiKeyRing(path)


@pytest.fixture
async def verifier(issuer: Issuer) -> OidcVerifier:
    return OidcVerifier(issuer.url, AUDIENCE, client=httpx.AsyncClient(timeout=5))


async def test_tokens_of_both_algorithms_and_their_claims(issuer: Issuer, verifier: OidcVerifier) -> None:
    principal = await verifier.verify(issuer.token(scopes=["subscriptions:read", "openid"]))
    assert (principal.id, principal.tenant) == ("oidc:user-1", "acme")
    assert principal.scopes == frozenset({"subscriptions:read"})
    ec = await verifier.verify(issuer.token(kid="ec-1", scopes=["events:publish"], claim="scp"))
    assert ec.scopes == {"events:publish"}
    admin = await verifier.verify(issuer.token(tenant=None, scopes=["admin"]))
    assert admin.admin
    assert admin.tenant is None
    await verifier.aclose()


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda i: i.token(expires_in=-120), "expired"),
        (lambda i: i.token(audience="other"), "not issued for this broker"),
        (lambda i: i.token(issuer="https://evil.example"), "not issued by the configured issuer"),
        (lambda i: i.token(extra={"nbf": 4102444800}), "not valid yet"),
        (lambda i: i.token(tenant=None, scopes=["subscriptions:read"]), "no 'tenant' claim"),
        (lambda i: i.token(kid="ec-1", key=i.rsa), "signed with"),
        (
            lambda i: jwt.encode({"sub": "x"}, "secret-of-32-bytes-for-hmac-0000", algorithm="HS256"),
            "not 'HS256'",
        ),
        (lambda i: jwt.encode({"sub": "x"}, "", algorithm="none"), "not 'none'"),
    ],
)
async def test_bad_tokens_are_refused_with_the_reason(
    issuer: Issuer, verifier: OidcVerifier, make: object, reason: str
) -> None:
    assert callable(make)
    with pytest.raises(InvalidToken, match=reason):
        await verifier.verify(make(issuer))
    await verifier.aclose()


async def test_unknown_key_ids_are_refetched_at_a_limited_pace(issuer: Issuer) -> None:
    now = [100.0]
    verifier = OidcVerifier(
        issuer.url, AUDIENCE, client=httpx.AsyncClient(timeout=5), monotonic=lambda: now[0]
    )
    await verifier.verify(issuer.token())
    assert verifier.fetches == 1
    from cryptography.hazmat.primitives.asymmetric import rsa

    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    issuer.published["rsa-2"] = rotated
    now[0] += REFETCH_INTERVAL + 1
    assert (await verifier.verify(issuer.token(kid="rsa-2"))).tenant == "acme"  # fetched again
    assert verifier.fetches == 2
    for _ in range(5):  # made-up key ids right after: no new fetch
        with pytest.raises(InvalidToken, match="a key the issuer does not publish"):
            await verifier.verify(issuer.token(kid="made-up", key=rotated))
    assert verifier.fetches == 2
    await verifier.aclose()


async def test_a_failing_issuer_is_asked_once_per_back_off_which_doubles(issuer: Issuer) -> None:
    """The negative cache: while the issuer fails, tokens are refused at once (with the time
    left as retry-after) and the issuer is asked again only when the back-off has passed; the
    back-off doubles up to its most and is forgotten once a fetch succeeds."""
    now = [1000.0]
    verifier = OidcVerifier(
        issuer.url, AUDIENCE, client=httpx.AsyncClient(timeout=5), monotonic=lambda: now[0]
    )
    issuer.down = True
    backoff = FIRST_BACKOFF
    for _ in range(8):
        hits = issuer.discovery_requests
        with pytest.raises(IssuerUnavailable):
            await verifier.verify(issuer.token())
        assert issuer.discovery_requests == hits + 1
        for _ in range(5):  # within the back-off: refused without asking
            with pytest.raises(IssuerUnavailable) as refused:
                await verifier.verify(issuer.token())
            assert 0 < refused.value.retry_after <= backoff
        assert issuer.discovery_requests == hits + 1
        now[0] += backoff
        backoff = min(MAX_BACKOFF, backoff * 2)
    assert backoff == MAX_BACKOFF
    issuer.down = False
    assert (await verifier.verify(issuer.token())).tenant == "acme"
    issuer.down = True
    now[0] += 3600 + 1  # the keys are old: the refresh fails, the cached keys still serve
    assert (await verifier.verify(issuer.token())).tenant == "acme"
    assert issuer.discovery_requests == hits + 3  # the success, the failed refresh
    await verifier.aclose()


async def test_concurrent_tokens_share_one_fetch(issuer: Issuer) -> None:
    verifier = OidcVerifier(issuer.url, AUDIENCE, client=httpx.AsyncClient(timeout=5))
    principals = await asyncio.gather(*(verifier.verify(issuer.token()) for _ in range(20)))
    assert {p.tenant for p in principals} == {"acme"}
    assert (issuer.discovery_requests, issuer.jwks_requests) == (1, 1)
    await verifier.aclose()

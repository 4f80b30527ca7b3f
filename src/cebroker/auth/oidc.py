"""OIDC bearer tokens: RS256 and ES256 JWTs verified against the issuer's published keys.

The issuer's keys (JWKS) are found through its discovery document
(``<issuer>/.well-known/openid-configuration``, whose ``issuer`` must be the configured one),
cached for :data:`KEYS_TTL`, and fetched again when a token names a key id the cache does not
hold, at most once per :data:`REFETCH_INTERVAL` (a stream of tokens with made-up key ids must
not become a stream of requests to the issuer).

The issuer is never asked twice at once: one fetch is in flight at a time and every token that
needs it waits for that one (single flight), for at most :data:`WAIT_BOUND` seconds, so a
hanging issuer holds no call longer than that (the fetch itself goes on, up to
:data:`FETCH_TIMEOUT`). A fetch that fails is not tried again for a while (a negative cache:
:data:`FIRST_BACKOFF` seconds, doubling with each failure in a row up to :data:`MAX_BACKOFF`);
meanwhile a token that needs keys the broker does not hold is answered at once with
:class:`IssuerUnavailable` (503 with ``Retry-After``). So a stream of JWT-shaped bearers, while
the issuer is down or hangs, costs the issuer one request per back-off period.

Verification (signature, ``iss``, ``aud``, ``exp``, ``nbf`` with :data:`LEEWAY` of clock
skew) is PyJWT's; the algorithm is fixed by the
broker, never taken from the token alone, so a token cannot pick ``none`` or an HMAC keyed with
the public key.

A token's scopes come from ``scope`` (space-separated, RFC 8693) or ``scp`` (an array or a
string); scopes the broker does not know are ignored. Its tenant comes from the configured
claim; a token without one is refused unless it has the ``admin`` scope.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt

from cebroker.principal import ADMIN, SCOPES, Principal
from cebroker.settings import is_loopback_host

log = logging.getLogger("cebroker.auth")

#: The signature algorithms accepted.
ALGORITHMS = ("RS256", "ES256")
#: Seconds of clock skew allowed on ``exp`` and ``nbf``.
LEEWAY = 60.0
#: Seconds the issuer's keys are used before they are fetched again.
KEYS_TTL = 3600.0
#: Least seconds between two fetches caused by unknown key ids.
REFETCH_INTERVAL = 30.0
#: Seconds the issuer has to answer.
FETCH_TIMEOUT = 5.0
#: Most seconds a call waits for the fetch in flight before it is answered 503.
WAIT_BOUND = 1.0
#: Seconds no fetch is tried after a first failure; doubles per failure in a row, up to the most.
FIRST_BACKOFF = 2.0
MAX_BACKOFF = 60.0


class InvalidToken(Exception):
    """The token is not one this broker accepts; the message says why (never the token)."""


class IssuerUnavailable(Exception):
    """The issuer's keys could not be fetched, so no token can be checked right now;
    ``retry_after`` is how many seconds until the broker tries again."""

    def __init__(self, message: str, retry_after: float = FIRST_BACKOFF) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class _Keys:
    by_id: dict[str | None, list[jwt.PyJWK]]
    fetched: float


def _secure_url(url: str) -> bool:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme == "https" or (scheme == "http" and is_loopback_host(parts.hostname or ""))


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    raw: Iterable[Any]
    if isinstance(claims.get("scope"), str):
        raw = claims["scope"].split()
    elif isinstance(claims.get("scp"), list):
        raw = claims["scp"]
    elif isinstance(claims.get("scp"), str):
        raw = claims["scp"].split()
    else:
        raw = ()
    return frozenset(s for s in raw if isinstance(s, str) and s in SCOPES)


class OidcVerifier:
    """Turns bearer tokens of one issuer, for one audience, into principals.

    Args:
        issuer: the issuer URL (``iss`` must equal it).
        audience: the value ``aud`` must hold.
        tenant_claim: the claim naming the caller's tenant.
        client: the HTTP client used to fetch the discovery document and the keys.
        monotonic: the clock cache ages and the refetch pace are read from.
    """

    def __init__(
        self,
        issuer: str,
        audience: str,
        *,
        tenant_claim: str = "tenant",
        client: httpx.AsyncClient | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.tenant_claim = tenant_claim
        self._client = client or httpx.AsyncClient(timeout=FETCH_TIMEOUT, follow_redirects=False)
        self._monotonic = monotonic
        self._keys: _Keys | None = None
        self._last_fetch: float | None = None
        #: The fetch in flight (single flight), if any.
        self._inflight: asyncio.Task[_Keys] | None = None
        #: The negative cache: no fetch before this time; the failure and the back-off it set.
        self._failed_until = 0.0
        self._failure: str | None = None
        self._backoff = 0.0
        #: How many times the keys were fetched (for tests and operators).
        self.fetches = 0

    async def aclose(self) -> None:
        """Stop the fetch in flight and close the HTTP client."""
        if self._inflight is not None:
            self._inflight.cancel()
            await asyncio.gather(self._inflight, return_exceptions=True)
        await self._client.aclose()

    async def verify(self, token: str) -> Principal:
        """The principal ``token`` stands for.

        Raises:
            InvalidToken: a bad signature, issuer, audience or time, an unknown key, no tenant.
            IssuerUnavailable: the issuer's keys cannot be fetched and none are cached.
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the bearer token is not a JWT") from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise InvalidToken(
                f"tokens are signed with {' or '.join(ALGORITHMS)}, not {str(algorithm)[:16]!r}"
            )
        kid = header.get("kid")
        candidates = await self._candidates(kid if isinstance(kid, str) else None, algorithm)
        claims: dict[str, Any] | None = None
        for key in candidates:
            try:
                claims = jwt.decode(
                    token,
                    key,
                    algorithms=[algorithm],
                    audience=self.audience,
                    issuer=self.issuer,
                    leeway=LEEWAY,
                    options={"require": ["exp", "iss", "aud"]},
                )
                break
            except jwt.InvalidSignatureError:
                continue
            except jwt.ExpiredSignatureError:
                raise InvalidToken("the token has expired") from None
            except jwt.ImmatureSignatureError:
                raise InvalidToken("the token is not valid yet (nbf)") from None
            except jwt.InvalidAudienceError:
                raise InvalidToken("the token was not issued for this broker (aud)") from None
            except jwt.InvalidIssuerError:
                raise InvalidToken("the token was not issued by the configured issuer (iss)") from None
            except jwt.MissingRequiredClaimError as exc:
                raise InvalidToken(f"the token has no {exc.claim!r} claim") from None
            except jwt.PyJWTError as exc:
                raise InvalidToken(f"the token is invalid: {exc}") from None
        if claims is None:
            raise InvalidToken("the token's signature does not verify")
        return self._principal(claims)

    def _principal(self, claims: dict[str, Any]) -> Principal:
        scopes = _scopes(claims)
        tenant = claims.get(self.tenant_claim)
        if not (isinstance(tenant, str) and tenant):
            if ADMIN not in scopes:
                raise InvalidToken(f"the token has no {self.tenant_claim!r} claim naming a tenant")
            tenant = None
        subject = claims.get("sub") or claims.get("azp") or claims.get("client_id") or "unknown"
        return Principal(f"oidc:{str(subject)[:128]}", tenant, scopes)

    async def _candidates(self, kid: str | None, algorithm: str) -> list[jwt.PyJWK]:
        keys = self._keys
        now = self._monotonic()
        if keys is None or now - keys.fetched > KEYS_TTL:
            keys = await self._fetch(required=keys is None)
        found = _pick(keys, kid, algorithm)
        if not found and self._may_refetch():
            keys = await self._fetch(required=False)
            found = _pick(keys, kid, algorithm)
        if not found:
            raise InvalidToken("the token is signed with a key the issuer does not publish")
        return found

    def _may_refetch(self) -> bool:
        last = self._last_fetch
        return last is None or self._monotonic() - last >= REFETCH_INTERVAL

    async def _fetch(self, *, required: bool) -> _Keys:
        """The issuer's keys, fetched by the one fetch in flight (started here if none is).

        With ``required`` false the cached keys are the answer whenever no fresh ones come
        (the issuer fails, hangs past the wait bound, or is backing off)."""
        cached = self._keys
        now = self._monotonic()
        if now < self._failed_until:
            if cached is not None and not required:
                return cached
            raise IssuerUnavailable(
                f"the issuer's keys could not be fetched ({self._failure}); the next try is in"
                f" {self._failed_until - now:.0f} s",
                retry_after=self._failed_until - now,
            )
        if self._inflight is None:
            self._last_fetch = now
            self._inflight = asyncio.get_running_loop().create_task(self._fetch_once())
            # Its failure is reported to whoever still waits, and logged once by the fetch.
            self._inflight.add_done_callback(_retrieve)
        try:
            # shield: a caller that stops waiting leaves the fetch to the others.
            return await asyncio.wait_for(asyncio.shield(self._inflight), WAIT_BOUND)
        except TimeoutError:
            if cached is not None and not required:
                return cached
            raise IssuerUnavailable(
                f"the issuer has not answered within {WAIT_BOUND:g} s", retry_after=FIRST_BACKOFF
            ) from None
        except IssuerUnavailable:
            if cached is not None and not required:
                return cached
            raise

    async def _fetch_once(self) -> _Keys:
        """One fetch: on success the keys are cached; on failure the back-off grows."""
        try:
            keys = await asyncio.wait_for(self._download(), FETCH_TIMEOUT)
        except (IssuerUnavailable, TimeoutError) as exc:
            reason = (
                str(exc) if isinstance(exc, IssuerUnavailable) else f"no answer within {FETCH_TIMEOUT:g} s"
            )
            self._backoff = min(MAX_BACKOFF, self._backoff * 2 if self._backoff else FIRST_BACKOFF)
            self._failed_until = self._monotonic() + self._backoff
            self._failure = reason
            if self._keys is None:
                log.warning(
                    "cannot fetch the OIDC issuer's keys (next try in %.0f s): %s", self._backoff, reason
                )
            else:
                log.warning("the OIDC issuer's keys were not refreshed, the cached ones stay: %s", reason)
            raise IssuerUnavailable(reason, retry_after=self._backoff) from None
        finally:
            self._inflight = None
        self._backoff = 0.0
        self._failure = None
        self._keys = keys
        return keys

    async def _download(self) -> _Keys:
        discovery = await self._json(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
        if discovery.get("issuer") != self.issuer:
            raise IssuerUnavailable(
                f"the discovery document names the issuer {str(discovery.get('issuer'))[:200]!r},"
                f" not {self.issuer!r}"
            )
        jwks_uri = discovery.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not _secure_url(jwks_uri):
            raise IssuerUnavailable("the discovery document has no https:// jwks_uri")
        document = await self._json(jwks_uri)
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise IssuerUnavailable("the issuer's JWKS has no 'keys' array")
        by_id: dict[str | None, list[jwt.PyJWK]] = {}
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except jwt.PyJWTError:
                continue  # a key type or algorithm this broker does not use
            if key.algorithm_name not in ALGORITHMS:
                continue
            kid = entry.get("kid")
            by_id.setdefault(kid if isinstance(kid, str) else None, []).append(key)
        self.fetches += 1
        log.info("fetched %d signing keys of the OIDC issuer %s", sum(map(len, by_id.values())), self.issuer)
        return _Keys(by_id, self._monotonic())

    async def _json(self, url: str) -> dict[str, Any]:
        try:
            response = await self._client.get(url, headers={"accept": "application/json"})
        except httpx.HTTPError as exc:
            raise IssuerUnavailable(f"{url}: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise IssuerUnavailable(f"{url} answered {response.status_code}")
        try:
            doc = response.json()
        except ValueError:
            raise IssuerUnavailable(f"{url} did not answer JSON") from None
        if not isinstance(doc, dict):
            raise IssuerUnavailable(f"{url} did not answer a JSON object")
        return doc


def _retrieve(task: asyncio.Task[_Keys]) -> None:
    if not task.cancelled():
        task.exception()


def _pick(keys: _Keys, kid: str | None, algorithm: str) -> list[jwt.PyJWK]:
    if kid is not None:
        pool = keys.by_id.get(kid, [])
    else:  # no key id: every key of the algorithm is a candidate
        pool = [key for group in keys.by_id.values() for key in group]
    return [key for key in pool if key.algorithm_name == algorithm]

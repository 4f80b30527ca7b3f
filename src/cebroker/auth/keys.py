"""API keys: a JSON file of SHA-256 hashes, each with an id, a tenant and scopes.

::

    {"keys": [{"id": "ops", "sha256": "<hex SHA-256 of the key>", "tenant": "acme",
               "scopes": ["subscriptions:read", "subscriptions:write"]}]}

Only hashes are on disk. A presented key is hashed and compared with every hash in constant time
(``hmac.compare_digest``, all of them, so the time does not tell which came close). The file is
re-read when it changes (checked at most once a second, on use) and on ``SIGHUP``; a file that
has become invalid is refused with an error in the log and the keys read before stay in force.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cebroker.errors import ConfigurationError
from cebroker.principal import ADMIN, SCOPES, Principal

log = logging.getLogger("cebroker.auth")

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
#: Seconds between two looks at the file's status.
CHECK_INTERVAL = 1.0


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One entry of the file: the hash of the key and the principal it stands for."""

    digest: bytes
    principal: Principal


def parse_api_keys(text: str, source: str) -> tuple[ApiKey, ...]:
    """The keys of a file's text.

    Raises:
        ConfigurationError: naming ``source`` and the entry, and saying what is wrong.
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{source}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ConfigurationError(f'{source}: expected an object {{"keys": [...]}}')
    keys: list[ApiKey] = []
    seen_ids: set[str] = set()
    seen_digests: set[bytes] = set()
    for index, entry in enumerate(doc["keys"]):
        key = _entry(entry, f"{source}: keys[{index}]")
        if key.principal.id in seen_ids:
            name = key.principal.id.removeprefix("key:")
            raise ConfigurationError(f"{source}: keys[{index}]: the id {name!r} is used twice")
        if key.digest in seen_digests:
            raise ConfigurationError(f"{source}: keys[{index}]: the same sha256 is listed twice")
        seen_ids.add(key.principal.id)
        seen_digests.add(key.digest)
        keys.append(key)
    return tuple(keys)


def _entry(entry: Any, where: str) -> ApiKey:
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where}: expected an object with id, sha256, tenant and scopes")
    unknown = sorted(set(entry) - {"id", "sha256", "tenant", "scopes"})
    if unknown:
        raise ConfigurationError(f"{where}: unknown member {unknown[0]!r}; known: id, sha256, tenant, scopes")
    key_id = entry.get("id")
    if not isinstance(key_id, str) or not key_id.strip():
        raise ConfigurationError(f"{where}: 'id' must be a non-empty string")
    digest = entry.get("sha256")
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise ConfigurationError(f"{where} ({key_id}): 'sha256' must be 64 hexadecimal digits")
    scopes = entry.get("scopes")
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise ConfigurationError(f"{where} ({key_id}): 'scopes' must be an array of scope names")
    for scope in scopes:
        if scope not in SCOPES:
            raise ConfigurationError(
                f"{where} ({key_id}): unknown scope {scope!r}; known: {', '.join(SCOPES)}"
            )
    tenant = entry.get("tenant")
    if tenant is not None and (not isinstance(tenant, str) or not tenant.strip()):
        raise ConfigurationError(f"{where} ({key_id}): 'tenant' must be a non-empty string")
    if tenant is None and ADMIN not in scopes:
        raise ConfigurationError(f"{where} ({key_id}): a key needs a 'tenant' unless it has the admin scope")
    principal = Principal(f"key:{key_id}", tenant, frozenset(scopes))
    return ApiKey(bytes.fromhex(digest), principal)


def _signature(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


class ApiKeyRing:
    """The keys of one file, re-read when it changes or on :meth:`reload`.

    ``monotonic`` is the clock the change check is paced on (injectable in tests).
    """

    def __init__(self, path: Path, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._monotonic = monotonic
        self._keys = parse_api_keys(self._read(), str(path))
        self._signature = _signature(path)
        self._checked = monotonic()

    def _read(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeError) as exc:
            raise ConfigurationError(f"{self.path}: cannot read the API keys: {exc}") from None

    def reload(self) -> bool:
        """Read the file again; on an invalid file keep the keys in force and log why.

        Returns:
            Whether the new keys are in force.
        """
        self._signature = _signature(self.path)
        try:
            keys = parse_api_keys(self._read(), str(self.path))
        except ConfigurationError as exc:
            log.error("API keys not reloaded, the previous %d stay in force: %s", len(self._keys), exc)
            return False
        self._keys = keys
        log.info("API keys reloaded from %s: %d keys", self.path, len(keys))
        return True

    def _maybe_reload(self) -> None:
        now = self._monotonic()
        if now - self._checked < CHECK_INTERVAL:
            return
        self._checked = now
        if _signature(self.path) != self._signature:
            self.reload()

    def find(self, presented: str) -> Principal | None:
        """The principal of the key ``presented``, or None."""
        self._maybe_reload()
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found: Principal | None = None
        for key in self._keys:
            # Every entry is compared, whichever matches, so the time taken says nothing.
            if hmac.compare_digest(digest, key.digest):
                found = key.principal
        return found


def file_mode_warning(path: Path) -> str | None:
    """A warning when ``path`` may be read by other users of the machine, or None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if os.name == "posix" and mode & 0o077:
        return f"{path} may be read by other users (mode {mode & 0o777:o}); 0600 keeps it private"
    return None

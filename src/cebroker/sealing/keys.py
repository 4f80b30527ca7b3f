"""The keys that seal stored secrets: a file of base64 AES-256 keys, one per line.

The first key seals; every key listed opens (during a rotation a value may still be sealed
with the previous key). Lines starting with ``#`` are comments. A key's id is the first 16 hex
digits of the SHA-256 of the key, stored with every value it seals, so that a wrong key file is
told apart from damaged data. Without ``--secrets-key-file`` the embedded broker keeps its key
in ``<db>.key`` beside the database, created with mode 0600 on first start.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from cebroker.errors import ConfigurationError
from cebroker.options.kinds import redact_url

log = logging.getLogger("cebroker.sealing")

KEY_BYTES = 32
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def key_id(key: bytes) -> str:
    """The id stored with every value ``key`` seals."""
    return hashlib.sha256(b"cebroker-secrets-key\x00" + key).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class KeyRing:
    """The keys of a key file; ``keys[0]`` seals. Key bytes never appear in the repr."""

    keys: tuple[bytes, ...] = field(repr=False)
    source: str = ""

    def __post_init__(self) -> None:
        if not self.keys:
            raise ConfigurationError(f"{self.source}: holds no key")

    @property
    def current(self) -> tuple[str, bytes]:
        """The id and bytes of the key that seals."""
        return key_id(self.keys[0]), self.keys[0]

    def by_id(self, kid: str) -> bytes | None:
        """The key with id ``kid``, or None."""
        for key in self.keys:
            if key_id(key) == kid:
                return key
        return None

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids of every key, the sealing one first."""
        return tuple(key_id(key) for key in self.keys)


def new_key() -> bytes:
    """A new random key."""
    return secrets.token_bytes(KEY_BYTES)


def format_keys(keys: tuple[bytes, ...]) -> str:
    """The text of a key file holding ``keys`` (the first seals)."""
    lines = ["# cebroker secrets key: the first key seals, every key listed opens. Keep private."]
    lines.extend(base64.b64encode(key).decode("ascii") for key in keys)
    return "\n".join(lines) + "\n"


def parse_keys(text: str, source: str) -> KeyRing:
    """The keys of a key file's text.

    Raises:
        ConfigurationError: naming the file and the line, never the key.
    """
    keys: list[bytes] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key = _decode(line)
        if key is None:
            raise ConfigurationError(f"{source}: line {number} is not a base64 key")
        if len(key) != KEY_BYTES:
            raise ConfigurationError(f"{source}: line {number} holds {len(key)} bytes; a key is {KEY_BYTES}")
        keys.append(key)
    return KeyRing(tuple(keys), source)


def _decode(line: str) -> bytes | None:
    padded = line + "=" * (-len(line) % 4)
    for altchars in (None, b"-_"):  # standard or URL-safe base64
        try:
            return base64.b64decode(padded, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
    return None


def load_key_file(path: Path) -> KeyRing:
    """The keys of the file at ``path``."""
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeError) as exc:
        raise ConfigurationError(f"{path}: cannot read the secrets key: {exc}") from None
    return parse_keys(text, str(path))


def write_key_file(path: Path, keys: tuple[bytes, ...], *, exclusive: bool = False) -> None:
    """Write ``keys`` to ``path`` with mode 0600, atomically (a new file renamed over the old),
    or only if ``path`` does not exist yet when ``exclusive``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = format_keys(keys).encode("ascii")
    if exclusive:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        return
    temporary = path.with_name(path.name + ".new")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def default_key_file(db: str | os.PathLike[str]) -> Path | None:
    """``<db>.key`` beside a SQLite database file; None for a database named by a URL."""
    text = os.fspath(db)
    if text.startswith("sqlite:"):
        text = text.removeprefix("sqlite:").removeprefix("//")
    elif _URL.match(text):
        return None
    return Path(text + ".key")


def key_ring(key_file: Path | None, db: str | os.PathLike[str]) -> tuple[KeyRing, Path]:
    """The keys a broker seals with: ``key_file`` (``--secrets-key-file``), else the default
    file beside the database, created (mode 0600) on first use and logged.

    Raises:
        ConfigurationError: the file cannot be read or holds no usable key, or the database is
            not a file and no key file is given.
    """
    if key_file is not None:
        return load_key_file(key_file), key_file
    path = default_key_file(db)
    if path is None:
        raise ConfigurationError(
            f"{redact_url(str(db))}: the database is not a file beside which a key could be kept;"
            " give --secrets-key-file"
        )
    if not path.exists():
        try:
            write_key_file(path, (new_key(),), exclusive=True)
        except FileExistsError:
            pass  # created meanwhile: read it below
        except OSError as exc:
            raise ConfigurationError(f"{path}: cannot create the secrets key: {exc}") from None
        else:
            log.info(
                "created the key that encrypts stored secrets: %s (mode 0600); back it up with the"
                " database: without it the stored secrets cannot be read",
                path,
            )
    return load_key_file(path), path

"""``cebroker secrets rotate``: seal every stored secret again under a new key.

With the broker stopped (the database lock is taken first, so a running broker makes this
refuse), a new key is generated and put first in the key file, next to the old one, so that
every value opens whatever happens next; every secret is sealed again with it in the store's
own transactions; then the old key is dropped from the file. With ``--new-key-file`` the new
key goes to that new file instead and the old file is left as it is: point the broker at the
new file afterwards. Values stored in clear by an earlier release are sealed on the way.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from cebroker.sealing.cipher import Sealer
from cebroker.sealing.keys import KeyRing, key_id, key_ring, new_key, write_key_file
from cebroker.sealing.store import reseal
from cebroker.storage import Storage, create_storage


async def _reseal(storage: Storage, sealer: Sealer) -> int:
    await storage.open()
    try:
        return await reseal(storage.subscriptions, sealer)
    finally:
        await storage.close()


def rotate_secrets(db: str | os.PathLike[str], key_file: Path | None, new_key_file: Path | None) -> str:
    """Rotate the key of the database ``db``; returns what was done, for the operator.

    Raises:
        ConfigurationError: a key file cannot be read or written.
        StorageError: the database is in use or cannot be opened.
    """
    storage = create_storage(db)
    storage.prepare()  # the lock first: a running broker keeps its key file untouched
    ring, path = key_ring(key_file, db)
    key = new_key()
    both = KeyRing((key, *ring.keys), str(new_key_file or path))
    if new_key_file is not None:
        write_key_file(new_key_file, (key,), exclusive=True)
    else:
        write_key_file(path, both.keys)
    count = asyncio.run(_reseal(storage, Sealer(both)))
    if new_key_file is None:
        write_key_file(path, (key,))
        where = f"{path} now holds only the new key"
    else:
        where = f"{new_key_file} holds the new key: start the broker with --secrets-key-file {new_key_file}"
    return f"sealed the secrets of {count} subscriptions with the new key {key_id(key)}; {where}"

"""Secrets at rest: credential secrets, tokens and webhook secrets encrypted in the database.

* :mod:`.keys`: the key file (one or more AES-256 keys, the first seals), created beside the
  database when none is given;
* :mod:`.cipher`: AES-256-GCM via ``cryptography``, a key id stored with each value;
* :mod:`.store`: a :class:`~cebroker.storage.SubscriptionStore` over any backend's that seals on
  the way in and opens on the way out, so no backend ever sees a secret in clear;
* :mod:`.rotate`: ``cebroker secrets rotate``.
"""

"""The PostgreSQL backend: everything the broker keeps in one database that any number of broker
instances share (see :mod:`cebroker.storage.postgres.deliveries` for claims and group commit,
:mod:`.instances` for leases, :mod:`.subscriptions` for the shared change feed). Needs the
``postgres`` extra (psycopg 3 and psycopg_pool)."""

from cebroker.storage.postgres.backend import PostgresStorage

__all__ = ["PostgresStorage"]

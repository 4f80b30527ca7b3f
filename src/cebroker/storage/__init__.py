"""The storage layer: every table the broker keeps, behind small contracts, among them:

* :class:`SubscriptionStore` (subscriptions and their change feed),
* :class:`DeliveryLog` (events, deliveries, dead letters, counts, de-duplication keys: small
  contracts bundled, see :mod:`cebroker.storage.deliveries`), and :class:`Claims` (claims and
  leases, from a backend several instances share),
* :class:`RegistryStore` (the xRegistry's entities, as synchronous row access in a transaction),
* :class:`CircuitStore` (the open circuits of subscriptions whose sinks are down),

and the event archive, pull delivery's locks and the reply channel, bundled by a
:class:`Storage` that one backend provides and :func:`create_storage` picks from
:data:`~cebroker.storage.backends.BACKENDS`. Components depend on these contracts only; the
embedded backend is :mod:`cebroker.storage.sqlite`.
"""

from cebroker.storage.backends import BACKENDS, create_storage
from cebroker.storage.base import Storage, StorageOptions
from cebroker.storage.circuits import Circuit, CircuitStore
from cebroker.storage.deliveries import (
    Appended,
    Claims,
    Cleanup,
    DeadLetter,
    DeadLetters,
    DeliveryLog,
    DeliveryStats,
    DueListener,
    DueQueue,
    Incoming,
    Ingest,
    Limits,
    Outcomes,
    Pending,
    RateBuckets,
    SubscriptionCounts,
)
from cebroker.storage.errors import IndexBehind, SchemaTooNew, StorageError, StorageInUse, StorageUnavailable
from cebroker.storage.health import StorageHealth
from cebroker.storage.registry import EntityClash, Kind, RegistryReader, RegistryRows, RegistryStore, Row
from cebroker.storage.subscriptions import (
    ChangeFeed,
    ChangeKind,
    InvalidCursor,
    SubscriptionChange,
    SubscriptionPage,
    SubscriptionQuery,
    SubscriptionStore,
)

__all__ = [
    "BACKENDS",
    "Appended",
    "ChangeFeed",
    "Claims",
    "Cleanup",
    "Circuit",
    "CircuitStore",
    "ChangeKind",
    "DeadLetter",
    "DeadLetters",
    "DeliveryLog",
    "DeliveryStats",
    "DueQueue",
    "DueListener",
    "EntityClash",
    "Incoming",
    "Ingest",
    "IndexBehind",
    "InvalidCursor",
    "Kind",
    "Limits",
    "Outcomes",
    "Pending",
    "RateBuckets",
    "RegistryReader",
    "RegistryRows",
    "RegistryStore",
    "Row",
    "SchemaTooNew",
    "Storage",
    "StorageError",
    "StorageHealth",
    "StorageInUse",
    "StorageOptions",
    "StorageUnavailable",
    "SubscriptionChange",
    "SubscriptionCounts",
    "SubscriptionPage",
    "SubscriptionQuery",
    "SubscriptionStore",
    "create_storage",
]

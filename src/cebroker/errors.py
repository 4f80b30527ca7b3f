"""The broker's exception hierarchy.

Foreign exceptions (sqlite3, httpx, protocol clients) are translated into these at the boundary
where they occur, so that the HTTP layer maps each class to exactly one status code::

    BrokerError
    ├── ValidationError      400  (one or more FieldProblems, JSON Pointers into the input)
    ├── UnsupportedMediaType 415
    ├── PayloadTooLarge      413
    ├── IncompleteRequest    400  (the client left before its body was complete; counted, not answered)
    ├── NotFound             404
    ├── PreconditionFailed   412  (If-Match mismatch)
    ├── Conflict             409
    ├── Unauthorized         401 with WWW-Authenticate (no or bad credentials)
    ├── Forbidden            403 (the principal lacks a scope, or a tenant policy refuses)
    ├── QuotaExceeded        429 (the tenant holds its maximum of subscriptions)
    ├── Overloaded           429/503 with Retry-After (bounded queues are full)
    └── StorageError         503 (see :mod:`cebroker.storage.errors`; with Retry-After when the
                             storage is unavailable)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One problem in a request: ``pointer`` is an RFC 6901 JSON Pointer to the offending field."""

    pointer: str
    message: str

    def to_json(self) -> dict[str, str]:
        """The entry as it appears in a problem+json ``errors`` list."""
        return {"pointer": self.pointer, "detail": self.message}


class BrokerError(Exception):
    """Base class of every error the broker raises on purpose."""

    status = 500
    title = "Internal error"
    type_suffix = "internal"
    #: Seconds after which a client may try again (sent as ``Retry-After``), when that helps.
    retry_after: float | None = None
    #: Further response headers (``WWW-Authenticate``), when the status calls for them.
    headers: dict[str, str] | None = None


class ValidationError(BrokerError, ValueError):
    """The input is invalid; carries every problem found, not only the first."""

    status = 400
    title = "Invalid request"
    type_suffix = "invalid"

    def __init__(self, problems: list[FieldProblem], detail: str | None = None) -> None:
        self.problems = list(problems)
        self.detail = detail or "; ".join(f"{p.pointer or '/'}: {p.message}" for p in self.problems)
        super().__init__(self.detail)


class UnsupportedMediaType(BrokerError):
    """The request's Content-Type is not one this endpoint accepts."""

    status = 415
    title = "Unsupported media type"
    type_suffix = "unsupported-media-type"


class PayloadTooLarge(BrokerError):
    """The request body (or one event in it) is over the configured limit."""

    status = 413
    title = "Payload too large"
    type_suffix = "payload-too-large"


class IncompleteRequest(BrokerError):
    """The request ended before its body was complete: the client disconnected or broke the
    chunked framing. Nobody is left to read an answer; the app counts it and logs one line."""

    status = 400
    title = "Incomplete request"
    type_suffix = "incomplete-request"


class NotFound(BrokerError, LookupError):
    """The addressed resource does not exist."""

    status = 404
    title = "Not found"
    type_suffix = "not-found"


class PreconditionFailed(BrokerError):
    """An ``If-Match`` precondition did not hold."""

    status = 412
    title = "Precondition failed"
    type_suffix = "precondition-failed"


class Conflict(BrokerError):
    """The request conflicts with the current state of the resource."""

    status = 409
    title = "Conflict"
    type_suffix = "conflict"


class Unauthorized(BrokerError):
    """No credentials, or credentials the broker does not accept (RFC 6750: ``Bearer``)."""

    status = 401
    title = "Unauthorized"
    type_suffix = "unauthorized"

    def __init__(self, detail: str, *, challenge: str) -> None:
        self.headers = {"WWW-Authenticate": challenge}
        super().__init__(detail)


class Forbidden(BrokerError):
    """The caller is known but may not do this: a missing scope, or a tenant policy."""

    status = 403
    title = "Forbidden"
    type_suffix = "forbidden"

    def __init__(self, detail: str, *, scope: str | None = None) -> None:
        self.scope = scope
        if scope is not None:
            self.headers = {"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{scope}"'}
        super().__init__(detail)


class QuotaExceeded(BrokerError):
    """A tenant already holds as many subscriptions as it may."""

    status = 429
    title = "Too many subscriptions"
    type_suffix = "quota-exceeded"


class NoReply(BrokerError):
    """A request published with ``Prefer: wait`` got no reply in time (it was accepted, though)."""

    status = 504
    title = "No reply in time"
    type_suffix = "no-reply"


class TooManyReplays(BrokerError):
    """A subscription, or its tenant, already has as many replays scanning the archive as it
    may; the client should retry after ``retry_after`` seconds."""

    status = 429
    title = "Too many replays"
    type_suffix = "too-many-replays"

    def __init__(self, detail: str, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(detail)


class ConfigurationError(Exception):
    """A setting or a file it names cannot be used; ``cebroker serve`` refuses to start (exit 2)
    with this message, which names the setting or the file and says why."""


class Overloaded(BrokerError):
    """A bounded queue or backlog is full; the client should retry after ``retry_after`` seconds."""

    status = 503
    title = "Service overloaded"
    type_suffix = "overloaded"

    retry_after: float

    def __init__(self, detail: str, retry_after: float, status: int = 503) -> None:
        self.retry_after = retry_after
        self.status = status
        super().__init__(detail)

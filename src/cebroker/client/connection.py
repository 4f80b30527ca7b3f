"""Where the management commands find the broker, and the HTTP calls they make.

Errors become :class:`CommandError` here, at the boundary: a refused call carries the broker's
RFC 9457 problem details, a failed connection says which URL could not be reached. The token is
sent, never printed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from cebroker.options import Duration, HttpUrl, Text, check_declared, options_of, setting

#: Prefix of the client's environment variables (shared with ``serve``).
VARIABLE_PREFIX = "CEBROKER_"


@dataclass(frozen=True, kw_only=True)
class Connection:
    """The broker a management command talks to; each field is a flag and a variable."""

    url: str = setting("http://127.0.0.1:8080", HttpUrl(), "base URL of the broker")
    token: str | None = setting(
        None, Text(), "bearer token, sent as 'Authorization: Bearer TOKEN'", metavar="TOKEN"
    )
    timeout: float = setting(30.0, Duration(positive=True), "timeout of each HTTP request")

    def __post_init__(self) -> None:
        check_declared(self)


CONNECTION_OPTIONS = options_of(Connection, VARIABLE_PREFIX)


class CommandError(Exception):
    """A command failed; ``problem`` holds the broker's problem details when it answered with some.

    Attributes:
        message: one line saying what failed.
        problem: the RFC 9457 document of a refused call, if any.
        status: the HTTP status of a refused call, if any.
        exit_code: the command's exit status (1; 2 when the command's own input is wrong).
    """

    def __init__(
        self,
        message: str,
        *,
        problem: Mapping[str, Any] | None = None,
        status: int | None = None,
        exit_code: int = 1,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.problem = problem
        self.status = status
        self.exit_code = exit_code


class BrokerClient:
    """Calls a broker's API; every answer outside 2xx raises :class:`CommandError`."""

    def __init__(self, connection: Connection) -> None:
        headers = {"Accept": "application/json, application/problem+json"}
        if connection.token:
            headers["Authorization"] = f"Bearer {connection.token}"
        self.base = connection.url.rstrip("/")
        self._http = httpx.Client(base_url=self.base, headers=headers, timeout=connection.timeout)

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        wait: float = 0.0,
    ) -> httpx.Response:
        """One request; the response when its status is 2xx. ``wait``: seconds the broker may
        hold the answer back on purpose (a long poll), added to the timeout."""
        if json_body is not None:
            content = json.dumps(json_body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        try:
            base = self._http.timeout
            read = None if base.read is None else base.read + wait
            extended = httpx.Timeout(connect=base.connect, read=read, write=base.write, pool=base.pool)
            response = self._http.request(
                method, path, content=content, headers=headers, params=params, timeout=extended
            )
        except httpx.HTTPError as exc:
            raise CommandError(f"cannot reach the broker at {self.base}: {_reason(exc)}") from exc
        check(response)
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON body of a successful call."""
        response = self.call(method, path, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise CommandError(
                f"{method} {path}: the broker answered with something that is not JSON"
            ) from exc

    @contextmanager
    def stream(self, path: str) -> Iterator[httpx.Response]:
        """A streamed GET (Server-Sent Events); raises before yielding when it is refused."""
        try:
            with self._http.stream(
                "GET", path, headers={"Accept": "text/event-stream"}, timeout=httpx.Timeout(None)
            ) as response:
                if not response.is_success:
                    response.read()
                check(response)
                yield response
        except httpx.HTTPError as exc:
            raise CommandError(f"lost the stream from {self.base}{path}: {_reason(exc)}") from exc


def check(response: httpx.Response) -> None:
    """Raise :class:`CommandError` for a response outside 2xx, with its problem details if any."""
    if response.is_success:
        return
    request = response.request
    what = f"{request.method} {request.url.path}: {response.status_code} {response.reason_phrase}"
    problem: Any = None
    if response.headers.get("content-type", "").startswith(("application/problem+json", "application/json")):
        try:
            problem = response.json()
        except ValueError:
            problem = None
    if isinstance(problem, dict):
        raise CommandError(what, problem=problem, status=response.status_code)
    text = response.text.strip()
    raise CommandError(f"{what}: {text[:300]}" if text else what, status=response.status_code)


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc)
    return text if text else type(exc).__name__

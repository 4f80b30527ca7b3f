"""RFC 9457 problem details responses (``application/problem+json``), and the 400 for a bad
query parameter or header, whose ``errors`` entry names the parameter instead of a pointer."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.responses import Response

from cebroker.errors import BrokerError, FieldProblem, ValidationError

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_BASE = "https://cebroker.dev/problems/"


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    type_suffix: str,
    errors: Sequence[FieldProblem] = (),
    headers: dict[str, str] | None = None,
    extra: dict[str, object] | None = None,
) -> Response:
    """Build a problem+json response; ``errors`` lists every field problem with its JSON Pointer."""
    body: dict[str, object] = {
        "type": PROBLEM_TYPE_BASE + type_suffix,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = [e.to_json() for e in errors]
    if extra:
        body.update(extra)
    return Response(
        # An unpaired surrogate (never accepted as input) would be written as its \uXXXX escape.
        json.dumps(body, ensure_ascii=False).encode("utf-8", "backslashreplace"),
        status_code=status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


def problem_from_error(exc: BrokerError) -> Response:
    """Map a broker error onto its problem+json response."""
    problems = exc.problems if isinstance(exc, ValidationError) else ()
    headers = dict(exc.headers) if exc.headers else None
    if exc.retry_after is not None:
        headers = {**(headers or {}), "Retry-After": str(max(1, math.ceil(exc.retry_after)))}
    return problem(
        exc.status,
        exc.title,
        str(exc),
        type_suffix=exc.type_suffix,
        errors=problems,
        headers=headers,
    )


@dataclass(frozen=True, slots=True)
class RequestPartProblem(FieldProblem):
    """A problem in a query parameter or header rather than in the JSON body.

    Serialized as ``{"parameter": "limit", "detail": ...}`` or ``{"header": "If-Match", ...}``
    (``pointer`` stays empty: a JSON Pointer addresses the body only).
    """

    part: str = "parameter"
    name: str = ""

    def to_json(self) -> dict[str, str]:
        """The entry as it appears in a problem+json ``errors`` list."""
        return {self.part: self.name, "detail": self.message}


def request_error(part: str, name: str, message: str) -> ValidationError:
    """A 400 for one bad query parameter (``part="parameter"``) or header (``part="header"``)."""
    return ValidationError(
        [RequestPartProblem("", message, part=part, name=name)], f"{part} {name}: {message}"
    )

"""xRegistry errors: each carries the spec's error name, HTTP status, subject and arguments.

The spec identifies every error by a type URI ending in ``#<name>`` and fills ``<arg>``
placeholders of its title from ``args``. :func:`render_error` turns an
:class:`XRegistryError` into an RFC 9457 problem+json response with those fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from starlette.responses import Response

from cebroker.errors import BrokerError, FieldProblem
from cebroker.web.problem import problem

CORE_SPEC = "https://github.com/xregistry/spec/blob/main/core/spec.md#"
HTTP_SPEC = "https://github.com/xregistry/spec/blob/main/core/http.md#"

#: name -> (HTTP status, title template, defined in http.md rather than spec.md)
_ERRORS: dict[str, tuple[int, str, bool]] = {
    "action_not_supported": (405, "The specified action (<action>) is not supported for: <subject>", True),
    "api_not_found": (404, "The specified API is not supported: <subject>", True),
    "bad_details": (400, "Use of $details in this context is not supported: <subject>", True),
    "bad_filter": (400, "An error was found in the filter expression: <filter>", False),
    "bad_flag": (400, "The specified flag (<flag>) is not allowed in this context: <subject>", False),
    "bad_inline": (400, "An error was found in the inline value: <inline>", False),
    "bad_sort": (400, "An error was found in the sort value: <sort>", False),
    "bad_request": (400, "The request cannot be processed as provided: <error_detail>", False),
    "details_required": (405, "$details suffix is needed when using PATCH for: <subject>", True),
    "extra_xregistry_header": (
        400,
        'xRegistry HTTP header "<name>" is not allowed on this request: <subject>',
        True,
    ),
    "compatibility_violation": (
        409,
        "The request would cause one or more Versions of this Resource to violate its compatibility "
        "rules (<compatibility>): <subject>",
        False,
    ),
    "format_violation": (400, "The document is not valid for its format (<format>): <subject>", False),
    "groups_only": (400, 'Attribute "<name>" is invalid. Only Group types are allowed: <subject>', False),
    "header_error": (400, 'There was an error processing HTTP header "<name>": <error_detail>', True),
    "invalid_attribute": (400, 'The attribute "<name>" is not valid: <error_detail>', False),
    "malformed_id": (400, "The specified ID value (<id>) is malformed: <error_detail>", False),
    "mismatched_epoch": (
        400,
        "The specified epoch value (<bad_epoch>) does not match its current value (<epoch>): <subject>",
        False,
    ),
    "mismatched_id": (
        400,
        'The specified "<singular>id" value (<invalid_id>) needs to be "<expected_id>": <subject>',
        False,
    ),
    "misplaced_epoch": (400, 'The specified "epoch" value needs to be within a "meta" entity', False),
    "missing_body": (400, "The request is missing an HTTP body - try '{}': <subject>", True),
    "not_found": (404, "The targeted entity (<subject>) cannot be found", False),
    "parsing_data": (400, "There was an error parsing the data: <error_detail>", False),
    "readonly": (400, "Updating a read-only entity (<subject>) is not allowed", False),
    "required_attribute_missing": (400, "One or more mandatory attributes are missing: <list>", False),
    "resources_only": (
        400,
        'Attribute "<name>" is invalid. Only Resource types are allowed: <subject>',
        False,
    ),
    "server_busy": (503, "The server is too busy to process the request; try again later", False),
    "server_error": (500, "An unexpected error occurred, please try again later: <subject>", False),
    "too_many_versions": (400, "The request would exceed the version limit of <limit>: <subject>", False),
    "unknown_id": (400, 'The "<singular>" with the ID "<id>" cannot be found: <subject>', False),
    "unsupported_specversion": (
        400,
        'The specified "specversion" value (<specversion>) is not supported: <subject>',
        False,
    ),
    "versionid_not_allowed": (400, 'A "versionid" is not allowed in this context: <subject>', False),
}


class XRegistryError(BrokerError):
    """An error the xRegistry spec names; ``code`` is the spec's error name."""

    def __init__(
        self,
        code: str,
        subject: str = "/",
        detail: str | None = None,
        headers: Mapping[str, str] | None = None,
        problems: Sequence[FieldProblem] = (),
        **args: object,
    ) -> None:
        if code not in _ERRORS:
            raise KeyError(f"unknown xRegistry error {code!r}")
        self.code = code
        self.status, template, self.http_only = _ERRORS[code]
        self.subject = subject
        self.args_map = {k: str(v) for k, v in args.items()}
        self.title = _fill(template, {"subject": subject, **self.args_map})
        self.detail = detail
        self.headers = dict(headers or {})
        self.problems = list(problems)
        super().__init__(detail or self.title)

    @property
    def type_uri(self) -> str:
        """The spec's URI for this error."""
        return (HTTP_SPEC if self.http_only else CORE_SPEC) + self.code


def _fill(template: str, values: Mapping[str, str]) -> str:
    out = template
    for key, value in values.items():
        out = out.replace(f"<{key}>", value)
    return out


def render_error(err: XRegistryError, instance: str, headers: Mapping[str, str]) -> Response:
    """The problem+json response for ``err`` (``instance`` is the request URL)."""
    extra: dict[str, object] = {"type": err.type_uri, "subject": err.subject, "instance": instance}
    if err.args_map:
        extra["args"] = err.args_map
    return problem(
        err.status,
        err.title,
        err.detail or err.title,
        type_suffix=err.code,
        errors=err.problems,
        headers={**headers, **(err.headers or {})},
        extra=extra,
    )

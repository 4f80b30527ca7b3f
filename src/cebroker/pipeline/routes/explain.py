"""Explain a match over HTTP.

* ``POST /subscriptions/{id}/explain`` with one CloudEvent (JSON event format, as
  ``application/json`` or ``application/cloudevents+json``): ``200 {"matched", "checks"}`` for
  the stored subscription.
* ``POST /explain`` with ``{"subscription": <a subscription body>, "event": <a CloudEvent>}``:
  the same for a draft, which is validated as a create would validate it and stored nowhere.

For a subscription with a transformation (``config.transform``) a matched event's answer adds
``transform``: the outgoing event or the drop, as the sink would receive it
(:mod:`cebroker.pipeline.transform.preview`).

A draft request may add ``reply``, a sample of what the sink would answer: the answer then adds
``reply``, ``{"accepted": bool, "reason": ...}``: whether the broker would publish it as the
subscription's reply (``config.reply: publish``, a type that is not reserved, the publish policy
of the subscription's tenant; registry validation and the hop limit are not previewed).

An invalid event is a 400 naming each attribute (``/time``; ``/event/time`` in a draft request),
an invalid draft the 400 of a create with its pointers under ``/subscription``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cebroker.errors import FieldProblem, NotFound, ValidationError
from cebroker.pipeline.brokerevents import is_reserved
from cebroker.pipeline.dispatch.replies import wants_replies
from cebroker.pipeline.explain import Explanation, explain_draft, to_json
from cebroker.pipeline.matcher import Matcher
from cebroker.pipeline.transform import OutputCheck
from cebroker.pipeline.transform.preview import preview
from cebroker.pipeline.wellformed import event_problems, normalize
from cebroker.subscription import Subscription
from cebroker.tenant_policies import TenantPolicies
from cebroker.web.access import principal_of
from cebroker.web.body import read_json

#: Media types an explain request may be sent as.
MEDIA_TYPES = ("application/json", "application/cloudevents+json")
#: Validates a draft subscription body as a create does (raises ValidationError).
Realize = Callable[[Any], Subscription]


class ExplainApi:
    """The explain routes over the pipeline's matcher.

    Args:
        matcher: the live index of stored subscriptions.
        realize: the Subscriptions API's validation of a body, for drafts.
        max_event_size: largest event in bytes; a draft request may add ``max_subscription_body``.
        check: the registry's check of transformed events, as deliveries have it.
    """

    def __init__(
        self,
        matcher: Matcher,
        realize: Realize,
        *,
        max_event_size: int,
        max_subscription_body: int,
        check: OutputCheck | None = None,
        policies: TenantPolicies | None = None,
    ) -> None:
        self._policies = policies or TenantPolicies()
        self._matcher = matcher
        self._check = check
        self._realize = realize
        self._max_event = max_event_size
        self._max_draft = max_event_size + max_subscription_body

    def routes(self) -> Sequence[BaseRoute]:
        """``POST /subscriptions/{id}/explain`` and ``POST /explain``."""
        return [
            Route("/subscriptions/{id}/explain", self.stored, methods=["POST"]),
            Route("/explain", self.draft, methods=["POST"]),
        ]

    async def stored(self, request: Request) -> Response:
        """Explain one event against a stored subscription."""
        subscription = str(request.path_params["id"])
        found = self._matcher.subscriptions.get(subscription)
        # Another tenant's subscription is answered exactly as one that does not exist.
        if found is None or not principal_of(request).sees(found.tenant):
            raise NotFound(f"no subscription {subscription[:64]!r}")
        event = _event(await read_json(request, limit=self._max_event, accepted=MEDIA_TYPES), "")
        try:
            explanation = self._matcher.explain(subscription, event)
        except KeyError as exc:  # deleted meanwhile, or its filters could not be indexed
            raise NotFound(f"subscription {subscription[:64]!r} is not in the index") from exc
        return JSONResponse(_answer(explanation, found, event, self._check))

    async def draft(self, request: Request) -> Response:
        """Explain one event against a subscription body that is not stored."""
        body = await read_json(request, limit=self._max_draft, accepted=MEDIA_TYPES)
        if not isinstance(body, dict):
            raise ValidationError([FieldProblem("", "expected an object with 'subscription' and 'event'")])
        problems = [
            FieldProblem(f"/{name}", "is required") for name in ("subscription", "event") if name not in body
        ]
        problems += [
            FieldProblem(f"/{name}", "unknown member; expected 'subscription', 'event' and 'reply'")
            for name in body
            if name not in ("subscription", "event", "reply")
        ]
        if problems:
            raise ValidationError(problems)
        try:
            draft = self._realize(body["subscription"])
        except ValidationError as exc:
            problems = [FieldProblem("/subscription" + p.pointer, p.message) for p in exc.problems]
        event_errors = event_problems(body["event"], "/event")
        if "reply" in body:
            event_errors += event_problems(body["reply"], "/reply")
        if problems or event_errors:
            raise ValidationError([*problems, *event_errors])
        event = normalize(body["event"])
        explanation = explain_draft(draft, event, self._matcher.observer)
        answer = _answer(explanation, draft, event, self._check)
        if "reply" in body:
            # A draft is the caller's: its replies would be published as the caller's tenant.
            tenant = principal_of(request).tenant
            answer["reply"] = self._reply_verdict(draft, tenant, normalize(body["reply"]))
        return JSONResponse(answer)

    def _reply_verdict(
        self, subscription: Subscription, tenant: str | None, reply: dict[str, Any]
    ) -> dict[str, Any]:
        """Whether ``reply`` would be published as ``subscription``'s reply, and why not."""
        reason: str | None = None
        if not wants_replies(subscription):
            reason = "the subscription does not publish replies (config.reply is not 'publish')"
        elif is_reserved(reply):
            reason = "its type is reserved for the broker's own events"
        elif not self._policies.may_publish(tenant, reply):
            reason = "the publish policy of the subscription's tenant refuses it"
        return {"accepted": reason is None, "reason": reason}


def _answer(
    explanation: Explanation, subscription: Subscription, event: dict[str, Any], check: OutputCheck | None
) -> dict[str, Any]:
    """The explanation, and for a matched event the transformation's outcome (when there is one)."""
    doc = to_json(explanation)
    if explanation.matched:
        shown = preview(subscription, event, check)
        if shown is not None:
            doc["transform"] = shown
    return doc


def _event(doc: Any, prefix: str) -> dict[str, Any]:
    problems = event_problems(doc, prefix)
    if problems:
        raise ValidationError(problems)
    return normalize(doc)

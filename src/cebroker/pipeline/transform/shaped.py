"""The fast path of a transformation whose expression is a map literal with constant keys (the
outgoing event written out, as the typical one picks members of the event, renames them and
adds constants).

The engine records such an expression's :class:`~.engine.Shape` when it compiles it: for each
member, a constant, a member read of ``event`` (``event.data.order``), a nested such map
literal, or any other operation (computed by its compiled closure). :func:`plan_of` turns it
into a :class:`Plan` once per subscription revision, with everything that does not depend on
the event worked out then: the JSON size of the keys and constants, whether each output member
is an attribute and with what rule its value is checked, whether the output can carry
``$delivery``. :meth:`Plan.outgoing` then builds the outgoing event in one pass: members read
from the stored event without the evaluator, computed ones in one evaluation frame (which counts
their steps and what they build, with the literals' own bytes counted first, as the evaluator
counts them), the JSON size of what it reads or computes counted as the general path's
conversion counts it.

It returns ``None`` whenever anything does not go the ordinary way: a member missing, a value
that is not a map, a computed member that fails, a size over the budget, binary data, an output
that would not be a valid event, a ``$delivery`` that is refused. The caller then runs the
general path (:func:`~.apply.prepare`), which gives the failure and its reason; the expression
has no clock and no randomness, so running it again gives what the fast path would have. What
the fast path returns is exactly what the general path returns (a property test holds the two
together).

What it does not do again for each event: check the output's attribute names and constant
values (they are the same for every event, checked here once), count the keys' and constants'
size, convert values that are plain already, copy the result into the outgoing event. What it
still checks for each event: every value it read or computed, by the rule of the attribute it
becomes (``origin: event.source`` makes an extension, which takes a string, an integer or a
boolean), and the size of what it read or computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ceprotocols.eventform import is_json_type
from ceprotocols.sender import Destination

from cebroker.pipeline.transform.engine import (
    SCALARS,
    CelProgram,
    Computed,
    Converter,
    Frame,
    Path,
    Record,
    built_of,
    depth_of_shape,
)
from cebroker.pipeline.transform.extras import NO_EXTRAS, Extras, ExtrasError, destination_with, parse_extras
from cebroker.pipeline.wellformed import any_text_accepted, event_problems, name_accepted, value_accepted

__all__ = ["Plan", "plan_of"]

#: The variable a transformation's expression sees.
ROOT: Final = "event"
#: The output's reserved member for what the binding sends besides the event (apply.py's).
DELIVERY: Final = "$delivery"
#: Attributes the broker owns (apply.py's): taken from the stored event, or must equal it.
OWNED: Final = ("specversion", "id", "replayid")
#: Attributes every event has (``specversion`` and ``id`` come from the stored event).
REQUIRED: Final = ("source", "type")

#: The value every output member that the event gives has before it is set (replaced in place,
#: so the output keeps the expression's order of members).
_LATER: Final = None
#: What the event's member read is when the event has no such member.
_MISSING: Final = object()


# What a member's value is: the event's member at a path (the first name, the rest), a nested
# record, a constant list or map, which the conversion copies on every evaluation (as the
# general path does it), or computed by its closure.
_PATH, _RECORD, _COPIED, _COMPUTED = range(4)
# How a member's value is checked: not at all (not an attribute), as an attribute that takes any
# string (a string needs no call), or by the attribute's rule (wellformed.value_accepted).
_FREE, _ANY_TEXT, _RULED = range(3)


class _Record:
    """A map literal of the output, planned: a dict of its members with the constants set (to
    be copied for each event, which keeps the literal's order), and the members whose value
    depends on the event: ``(name, what it is, its arguments, how it is checked)``."""

    __slots__ = ("dynamic", "template")

    def __init__(self, template: dict[str, Any], dynamic: tuple[_Dynamic, ...]) -> None:
        self.template = template
        self.dynamic = dynamic


_Dynamic = tuple[str, int, Any, Any, int]


class _Unsure(Exception):
    """Something did not go the ordinary way: the general path decides."""


class Plan:
    """A shaped transformation, ready to run on each event (see the module docstring)."""

    __slots__ = (
        "_budget",
        "_built",
        "_computes",
        "_constant_type",
        "_delivery",
        "_fixed",
        "_limit",
        "_owned",
        "_record",
    )

    def __init__(self, program: CelProgram, record: _Record, fixed: int, computes: bool) -> None:
        """``record``: the output, planned; ``fixed``: the JSON size of its keys, braces and
        scalar constants (what the conversion counts whatever the event); ``computes``:
        whether a member is computed (each evaluation then has a frame)."""
        self._budget = program.budget
        self._built = built_of(program.shape) if program.shape is not None else 0
        self._computes = computes
        self._limit = program.budget.max_output_bytes
        self._record = record
        self._fixed = fixed
        self._delivery = DELIVERY in record.template
        #: Whether the expression sets an attribute the broker owns.
        self._owned = any(name in record.template for name in OWNED)
        content_type = record.template.get("datacontenttype")
        #: Whether a constant ``datacontenttype`` is a JSON type (None: not a constant).
        self._constant_type = is_json_type(content_type) if isinstance(content_type, str) else None

    def outgoing(
        self, event: Mapping[str, Any], destination: Destination, batch: bool
    ) -> tuple[dict[str, Any], Destination, Extras] | None:
        """The outgoing event, its destination and its ``$delivery`` for ``event`` as stored,
        exactly as the general path makes them; ``None`` when the general path must decide
        (see the module docstring)."""
        if type(event) is not dict or "data_base64" in event:
            return None  # binary data: the expression sees bytes (apply._view)
        converters: list[Converter] = []
        frame = None
        if self._computes:
            frame = Frame({ROOT: event}, self._budget)
            frame.build(self._built, None)  # the literals' own, as the evaluator counts them
        try:
            out, size = self._assemble(self._record, event, 0, converters, frame)
        except Exception:  # whatever it is (a member missing, a computed one failing): the
            return None  # general path reports it
        if converters:
            size += converters[0].size
        if self._fixed + size > self._limit:
            return None
        extras = NO_EXTRAS
        if self._delivery:
            try:
                extras = parse_extras(out.pop(DELIVERY), destination.protocol, batch=batch)
            except ExtrasError:
                return None
        # The attributes the broker owns: the stored event's (added after the expression's
        # members, in this order), or the expression's when it has them and they are the same.
        specversion, id_ = event.get("specversion"), event.get("id")
        if self._owned:
            for name in OWNED:
                if name not in event:
                    continue
                stored = event[name]
                if name not in out:
                    if not value_accepted(name, stored):
                        return None
                    out[name] = stored
                elif out[name] != stored:
                    return None
            if "specversion" not in out or "id" not in out:
                return None
        elif type(id_) is str and id_ and specversion == "1.0" and type(specversion) is str:
            out["specversion"] = specversion
            out["id"] = id_
            if "replayid" in event:
                stored = event["replayid"]
                if not value_accepted("replayid", stored):
                    return None
                out["replayid"] = stored
        else:
            return None
        data = out.get("data")
        if data is not None and not isinstance(data, str):
            if isinstance(data, bytes):
                return None
            json_type = self._constant_type
            if json_type is None:
                json_type = is_json_type(out.get("datacontenttype"))
            if not json_type:
                return None
        if extras is NO_EXTRAS:
            return out, destination, extras
        if extras.key is not None:
            key_attribute = str(destination.settings.get("partitionkeyextractor") or "partitionkey")
            out[key_attribute] = extras.key
            if event_problems(out, ""):
                return None
        return out, destination_with(destination, extras), extras

    def _assemble(
        self,
        record: _Record,
        event: dict[str, Any],
        depth: int,
        converters: list[Converter],
        frame: Frame | None,
    ) -> tuple[dict[str, Any], int]:
        """One record's dict, and the JSON size of what it read from the event."""
        out = record.template.copy()
        size = 0
        value: Any
        for name, kind, first, rest, rule in record.dynamic:
            if kind == _PATH:
                value = event if first is None else event.get(first, _MISSING)
                for step in rest:
                    if type(value) is not dict or step not in value:
                        raise _Unsure
                    value = value[step]
                if type(value) is str:
                    size += len(value) + 2
                    if rule == _ANY_TEXT:
                        out[name] = value
                        continue
                elif (count := SCALARS.get(type(value))) is not None:
                    size += count
                elif value is _MISSING:
                    raise _Unsure  # the event has no such member
                else:
                    value = self._converter(converters).plain(value, depth + 1)
            elif kind == _RECORD:
                value, read = self._assemble(first, event, depth + 1, converters, frame)
                size += read
            elif kind == _COMPUTED:
                value = first(frame)
                if type(value) is str:
                    size += len(value) + 2
                elif (count := SCALARS.get(type(value))) is not None:
                    size += count
                else:
                    value = self._converter(converters).plain(value, depth + 1)
            else:
                value = self._converter(converters).plain(first, depth + 1)
            if rule and not value_accepted(name, value):
                raise _Unsure
            out[name] = value
        return out, size

    def _converter(self, converters: list[Converter]) -> Converter:
        """The evaluation's one converter (one, so that a list or map met twice is counted
        twice and converted once, as the general path does it), made when first needed."""
        if not converters:
            converters.append(Converter(self._budget))
        return converters[0]


def plan_of(program: CelProgram) -> Plan | None:
    """The fast path of ``program`` when its shape has one (None: the general path only)."""
    shape = program.shape
    if not isinstance(shape, Record):
        return None
    budget = program.budget
    if built_of(shape) > budget.max_output_bytes or depth_of_shape(shape) > budget.max_depth:
        return None  # every evaluation fails the same way: the general path says how
    names = [name for name, _ in shape.members]
    if any(name not in names for name in REQUIRED):
        return None  # never a valid event
    fixed = [0]
    try:
        record = _planned(shape, fixed, top=True)
    except _Unsure:
        return None
    return Plan(program, record, fixed[0], _computes(shape))


def _computes(record: Record) -> bool:
    return any(
        isinstance(member, Computed) or isinstance(member, Record) and _computes(member)
        for _, member in record.members
    )


def _planned(record: Record, fixed: list[int], *, top: bool) -> _Record:
    """The record planned; ``fixed`` counts the JSON size that does not depend on the event
    (the braces, the keys and the scalar constants), as the conversion counts it."""
    fixed[0] += 2
    template: dict[str, Any] = {}
    dynamic: list[_Dynamic] = []
    for name, shape in record.members:
        fixed[0] += len(name) + 2
        attribute = top and name not in ("data", DELIVERY)
        if top and name == "data_base64" or attribute and not name_accepted(name):
            raise _Unsure  # binary data given as text, or a name no attribute may have
        rule = (_ANY_TEXT if any_text_accepted(name) else _RULED) if attribute else _FREE
        template[name] = _LATER
        if isinstance(shape, Path):
            if shape.root != ROOT:
                raise _Unsure  # an undeclared name, or a type's: the general path
            first = shape.names[0] if shape.names else None
            dynamic.append((name, _PATH, first, shape.names[1:], rule))
        elif isinstance(shape, Record):
            if attribute:
                raise _Unsure  # a map is no attribute value
            dynamic.append((name, _RECORD, _planned(shape, fixed, top=False), (), _FREE))
        elif isinstance(shape, Computed):
            dynamic.append((name, _COMPUTED, shape.run, (), rule))
        else:
            value = shape.value
            if type(value) is str:
                fixed[0] += len(value) + 2
            elif (count := SCALARS.get(type(value))) is not None:
                fixed[0] += count
            else:  # a list or map (or a value the conversion turns into text): each time
                dynamic.append((name, _COPIED, value, (), rule))
                continue
            if attribute and not value_accepted(name, value):
                raise _Unsure  # the same invalid value for every event
            template[name] = value
    return _Record(template, tuple(dynamic))

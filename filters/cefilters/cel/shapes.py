"""What an expression builds, when it writes its result out: its shape.

Many expressions that reshape a value (a transformation that picks fields and renames them) are
map literals with constant keys whose values are constants, member reads of a variable
(``event.data.order``), further such map literals or other operations. For those (and for a
member read or a constant alone) the compiler records a :class:`Shape` next to the closure it
compiles (:attr:`cefilters.cel.CelProgram.shape`), so that a caller that evaluates the
expression once per input can assemble the same value with only the computed members left to
the evaluator, and fall back to :meth:`~cefilters.cel.CelProgram.evaluate_raw` whenever a step
does not go the ordinary way (a member missing, a value that is not a map, a computed member
failing).

What each shape evaluates to, exactly as the evaluator does it when nothing fails:

* :class:`Constant`: ``value`` (a folded constant: the same object on every evaluation);
* :class:`Path`: the variable ``root`` as bound (a map), then ``names`` looked up one after the
  other, each in the map the previous one gave (a missing key or a value that is not a map is
  an evaluation error);
* :class:`Record`: a new ``dict`` of ``members`` in their order, each value its shape's value;
  every evaluation counts ``16 * len(members)`` bytes built toward the budget (``built``);
* :class:`Computed` (only as a record's member): any other operation, ``run(frame)``, with a
  :class:`~cefilters.cel.macros.Frame` of the variables and the budget, which counts the steps
  and the bytes it builds as the evaluator's frame does (one frame for the whole record, with
  the records' ``built`` counted in it first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .macros import Frame

__all__ = ["Computed", "Constant", "Path", "Record", "Shape", "built_of", "depth_of_shape"]


@dataclass(frozen=True, slots=True)
class Constant:
    """A value known when the expression was compiled."""

    value: object


@dataclass(frozen=True, slots=True)
class Path:
    """``root.names[0].names[1]...`` (or ``root["name"]``): members of a variable, by name."""

    root: str
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Computed:
    """A record's member that is neither a constant, a member read nor a record."""

    run: Callable[[Frame], object]


@dataclass(frozen=True, slots=True)
class Record:
    """A map literal with distinct constant string keys, in the literal's order."""

    members: tuple[tuple[str, Shape], ...]


Shape = Constant | Path | Record | Computed


def built_of(shape: Shape) -> int:
    """The bytes one evaluation of ``shape`` counts as built (its map literals' entries)."""
    if isinstance(shape, Record):
        return 16 * len(shape.members) + sum(built_of(member) for _, member in shape.members)
    return 0


def depth_of_shape(shape: Shape) -> int:
    """How many records are nested in ``shape`` (0 for a constant or a path)."""
    if isinstance(shape, Record):
        return 1 + max((depth_of_shape(member) for _, member in shape.members), default=0)
    return 0

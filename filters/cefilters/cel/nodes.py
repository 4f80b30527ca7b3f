"""The compiled form of a CEL operation (:class:`Node`) and the runners shared by several rules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import lark

from .budget import BudgetExceeded, CelEvaluationError, Position
from .macros import Frame
from .shapes import Constant, Shape
from .values import type_name

__all__ = ["Node", "Run", "built", "constant", "depth_of", "index", "located", "logical", "position_of"]

Run = Callable[[Frame], object]


@dataclass(frozen=True, slots=True)
class Node:
    """One compiled operation; see the module docstring. ``shape``: what it builds, when it
    writes it out: a map literal with constant keys, a member read, a constant (:mod:`.shapes`)."""

    run: Run
    cost: int
    depth: int
    size: int | None = None
    constant: bool = False
    value: object = None
    shape: Shape | None = None


def position_of(tree: lark.Tree[lark.Token] | lark.Token) -> Position | None:
    line = getattr(tree, "line", None) if isinstance(tree, lark.Token) else getattr(tree.meta, "line", None)
    column = (
        getattr(tree, "column", None) if isinstance(tree, lark.Token) else getattr(tree.meta, "column", None)
    )
    return (line, column) if isinstance(line, int) and isinstance(column, int) else None


def constant(value: object, size: int | None = None) -> Node:
    def run(frame: Frame) -> object:
        return value

    return Node(run, 0, 1, size, constant=True, value=value, shape=Constant(value))


def located(run: Run, position: Position | None) -> Run:
    """``run`` whose errors carry ``position`` when they have none yet."""

    def located(frame: Frame) -> object:
        try:
            return run(frame)
        except CelEvaluationError as error:
            if error.position is None:
                error.position = position
            raise

    return located


def depth_of(*nodes: Node) -> int:
    return 1 + max((node.depth for node in nodes), default=0)


def built(value: object) -> int:
    """What a concatenation copies of ``value``: its characters, bytes, or 8 per member."""
    return 8 * len(value) if isinstance(value, list) else len(value) if isinstance(value, str | bytes) else 0


def index(target: object, key: object, position: Position | None) -> object:
    if isinstance(target, list):
        if isinstance(key, float) and key.is_integer():
            key = int(key)
        if type(key) is not int and not (isinstance(key, int) and not isinstance(key, bool)):
            raise CelEvaluationError(f"no such overload: list[{type_name(key)}]", position)
        if 0 <= key < len(target):
            return target[key]
        raise CelEvaluationError(f"index out of range: {key}", position)
    if isinstance(target, dict):
        if (type(key) in (str, int, bool) or isinstance(key, int)) and key in target:
            return target[key]
        raise CelEvaluationError(f"no such key: {str(key)[:40]!r}", position)
    raise CelEvaluationError(f"no such overload: {type_name(target)}[{type_name(key)}]", position)


def logical(operands: list[Node], *, absorbing: bool, position: Position | None) -> Node:
    """``||`` (``absorbing``: any ``true`` wins) or ``&&`` (any ``false`` wins) over all operands,
    with CEL's commutative error rule: an error or a non-bool counts only when no operand wins."""
    runs = tuple(operand.run for operand in operands)
    symbol = "||" if absorbing else "&&"

    def logical(frame: Frame) -> object:
        failure: CelEvaluationError | None = None
        for run in runs:
            try:
                value = run(frame)
            except BudgetExceeded:
                raise
            except CelEvaluationError as error:
                failure = failure or error
                continue
            if value is absorbing:
                return absorbing
            if value is not (not absorbing) and failure is None:
                failure = CelEvaluationError(f"no such overload: {type_name(value)} {symbol} …", position)
        if failure is not None:
            raise failure
        return not absorbing

    return Node(logical, 1 + sum(o.cost for o in operands), depth_of(*operands))

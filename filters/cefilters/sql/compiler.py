"""Compilation of a CESQL syntax tree into nested Python closures, once per expression.

Each node becomes a closure ``event -> value`` that raises ``EvaluationFailure`` on the first
error (fail-fast evaluation, CESQL v1 §4.1). Static types drive the casts, which are resolved at
compile time wherever the operand types are known; subexpressions that do not read the event
are folded to constants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from cefilters.sql.ast import Attribute, Call, Chain, Exists, In, Like, Literal, Node, Unary
from cefilters.sql.compiled import (
    Compiled,
    Evaluator,
    Event,
    as_boolean,
    as_integer,
    as_string,
    as_type,
    attribute,
    constant,
    finish,
)
from cefilters.sql.errors import EvaluationFailure, ParseError
from cefilters.sql.functions import BUILTINS, Function, FunctionError, FunctionTable
from cefilters.sql.fused import attribute_like
from cefilters.sql.growth import check_growth
from cefilters.sql.like import LikePattern, compile_like
from cefilters.sql.operators import compile_chain, equals
from cefilters.sql.types import INT32_MIN, Type, Value

__all__ = ["compile_tree"]

_PYTHON_TYPES: Final[dict[Type, type]] = {Type.BOOLEAN: bool, Type.INTEGER: int, Type.STRING: str}


class _Compiler:
    def __init__(self, text: str, functions: FunctionTable, strict_functions: bool) -> None:
        self._text = text
        self._functions = functions
        self._strict_functions = strict_functions

    def compile(self, node: Node, root: bool = False) -> Compiled:
        if isinstance(node, Literal):
            return constant(node.value)
        if isinstance(node, Attribute):
            if node.name in _PAYLOAD_MEMBERS:
                return _payload_reference(node.name)
            return attribute(node.name)
        if isinstance(node, Exists):
            return self._exists(node)
        if isinstance(node, Unary):
            return self._unary(node)
        if isinstance(node, Chain):
            return compile_chain(node, [self.compile(operand) for operand in node.operands])
        if isinstance(node, Like):
            return self._like(node)
        if isinstance(node, In):
            return self._in(node)
        return self._call(node, root)

    def _exists(self, node: Exists) -> Compiled:
        name = node.name
        if name in _PAYLOAD_MEMBERS:
            return constant(False)
        # A null attribute counts as absent, as everywhere else.
        return Compiled(lambda event: event.get(name) is not None, Type.BOOLEAN)

    def _unary(self, node: Unary) -> Compiled:
        operand = self.compile(node.operand)
        if node.operator == "NOT":
            boolean = as_boolean(operand)
            return finish(lambda event: not boolean(event), Type.BOOLEAN, operand.pure)
        integer, position = as_integer(operand), node.position

        def negate(event: Event) -> int:
            value = integer(event)
            if value == INT32_MIN:
                raise EvaluationFailure("math", f"integer overflow: negating {value} at position {position}")
            return -value

        return finish(negate, Type.INTEGER, operand.pure)

    def _like(self, node: Like) -> Compiled:
        operand = self.compile(node.operand)
        pattern = compile_like(node.pattern)
        if operand.attribute is not None:
            return Compiled(attribute_like(operand.attribute, pattern, node.negated), Type.BOOLEAN)
        evaluate = _like_evaluator(as_string(operand), pattern, node.negated)
        return finish(evaluate, Type.BOOLEAN, operand.pure)

    def _in(self, node: In) -> Compiled:
        operand = self.compile(node.operand)
        items = [self.compile(item) for item in node.items]
        pure = operand.pure and all(item.pure for item in items)
        found, left = not node.negated, operand.evaluate
        if all(item.value is not None for item in items):
            return finish(_in_constants(operand, items, found), Type.BOOLEAN, pure)
        evaluators = [item.evaluate for item in items]

        def member(event: Event) -> bool:
            # Left to right, stopping at the first match (an error after it is not reached).
            # Each item is cast to the left operand's type: equals() casts its first argument.
            value = left(event)
            for evaluate in evaluators:
                if equals(evaluate(event), value):
                    return found
            return not found

        return finish(member, Type.BOOLEAN, pure)

    def _call(self, node: Call, root: bool) -> Compiled:
        function = self._functions.resolve(node.name, len(node.args))
        if function is None:
            return self._missing_function(node)
        args = [self.compile(arg) for arg in node.args]
        cast_to = _CASTING_FUNCTIONS.get(function)
        if cast_to is not None:
            # INT(x), BOOL(x), STRING(x) are the implicit casts made explicit: reuse them, so
            # INT(hop) fuses into the attribute read like any implicit cast does.
            (arg,) = args
            return finish(as_type(arg, cast_to), cast_to, arg.pure)
        evaluators = [as_type(arg, function.parameter_type(i)) for i, arg in enumerate(args)]
        call = _invoke(function, node, evaluators, root)
        return finish(call, function.returns, function.pure and all(arg.pure for arg in args))

    def _missing_function(self, node: Call) -> Compiled:
        arity = len(node.args)
        message = f"no function {node.name} taking {arity} argument{'' if arity == 1 else 's'}"
        if self._strict_functions:
            raise ParseError(self._text, node.position, message, kind="missingFunction")

        def missing(event: Event) -> Value:
            raise EvaluationFailure("missingFunction", f"{message} at position {node.position}")

        return Compiled(missing, Type.BOOLEAN)


_NO_EVENT: Final[Event] = {}
# The JSON event format carries the payload in these members; CESQL only sees context
# attributes (CESQL v1 §1: the data is not addressable), so they always read as absent.
_PAYLOAD_MEMBERS: Final = frozenset({"data"})
_BUILTIN_OVERLOADS: Final = frozenset(BUILTINS)
_CASTING_FUNCTIONS: Final[dict[Function, Type]] = {
    function: function.returns
    for function in BUILTINS
    if function.name in ("INT", "BOOL", "STRING") and function.parameters == (Type.ANY,)
}


def _payload_reference(name: str) -> Compiled:
    message = f"{name!r} is the event payload, which CESQL cannot address"

    def payload(event: Event) -> Value:
        raise EvaluationFailure("missingAttribute", message)

    return Compiled(payload, Type.ANY)


def _like_evaluator(text: Callable[[Event], str], pattern: LikePattern, negated: bool) -> Evaluator:
    """The LIKE closure; the common pattern shapes are inlined (one call fewer per event)."""
    literal = pattern.literal
    if pattern.shape == "prefix":

        def prefix(event: Event) -> bool:
            return text(event).startswith(literal) is not negated

        return prefix
    if pattern.shape == "suffix":

        def suffix(event: Event) -> bool:
            return text(event).endswith(literal) is not negated

        return suffix
    if pattern.shape == "exact":

        def exact(event: Event) -> bool:
            return (text(event) == literal) is not negated

        return exact
    match = pattern.match

    def general(event: Event) -> bool:
        return match(text(event)) is not negated

    return general


def _in_constants(operand: Compiled, items: list[Compiled], found: bool) -> Evaluator:
    """``x IN (constants)``: the items are cast once per possible type of x, then a hash lookup
    replaces the scan. An item that cannot be cast raises its cast error only when no earlier
    item matched, as a left-to-right scan would."""
    types = (operand.type,) if operand.type is not Type.ANY else (Type.BOOLEAN, Type.INTEGER, Type.STRING)
    tables: dict[type, tuple[frozenset[Value], Evaluator | None]] = {}
    for target in types:
        values: set[Value] = set()
        failure: Evaluator | None = None
        for item in items:
            cast_item = as_type(item, target)
            try:
                values.add(cast_item(_NO_EVENT))
            except EvaluationFailure:
                failure = cast_item
                break
        tables[_PYTHON_TYPES[target]] = (frozenset(values), failure)
    left = operand.evaluate

    def member(event: Event) -> bool:
        value = left(event)
        # type() is exact, so True and 1 never meet in one table despite equal hashes.
        values, failure = tables[type(value)]
        if value in values:
            return found
        if failure is not None:
            failure(event)
        return not found

    return member


def _invoke(function: Function, node: Call, evaluators: list[Evaluator], root: bool) -> Evaluator:
    implementation, name, position = function.implementation, node.name, node.position
    # Only the outermost operation's own failure value reaches the result; inside an operator
    # the operator yields its zero value instead (CESQL v1 §4).
    keep_value = root

    def failed(error: FunctionError) -> EvaluationFailure:
        value = error.value if keep_value else None
        return EvaluationFailure(error.kind, f"{error.message} (at position {position})", value)

    if function in _BUILTIN_OVERLOADS and len(evaluators) == 1:
        # The usual case, kept lean: built-ins return their declared type and raise nothing
        # but FunctionError and EvaluationFailure.
        (argument,) = evaluators

        def invoke_builtin(event: Event) -> Value:
            try:
                return implementation(argument(event))
            except FunctionError as error:
                raise failed(error) from None

        return invoke_builtin

    expected = _PYTHON_TYPES[function.returns]

    def invoke(event: Event) -> Value:
        args = [evaluate(event) for evaluate in evaluators]
        try:
            result = implementation(*args)
        except FunctionError as error:
            raise failed(error) from None
        except EvaluationFailure:
            raise
        except Exception as error:  # a user-defined function's bug must not escape evaluate()
            raise EvaluationFailure("functionEvaluation", f"{name} failed: {error!r}") from None
        if type(result) is not expected:
            raise EvaluationFailure(
                "functionEvaluation",
                f"{name} returned a {type(result).__name__}, not a {function.returns.value}",
            )
        return result

    return invoke


def compile_tree(text: str, node: Node, functions: FunctionTable, strict_functions: bool) -> Compiled:
    """Compile the tree of ``text``; raises ``ParseError`` for an unknown function if
    ``strict_functions``."""
    check_growth(text, node)
    return _Compiler(text, functions, strict_functions).compile(node, root=True)

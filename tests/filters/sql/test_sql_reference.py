"""Differential test: the compiled closures against a plain tree-walking interpreter.

The compiler folds constants, fuses attribute reads with tests, turns ``IN`` lists into hash
lookups and runs operator chains in loops. This module re-states the semantics as directly as
possible (walk the syntax tree, cast, compute, fail fast) and checks, on random well-formed
expressions and random events, that both give the same value and the same error.
"""

from __future__ import annotations

import functools

from cefilters import sql
from cefilters.sql import ast
from cefilters.sql.functions import FunctionError
from cefilters.sql.parser import parse
from cefilters.sql.types import INT32_MAX, INT32_MIN, to_bool, to_int, to_str
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

Value = bool | int | str


class Failure(Exception):
    def __init__(self, kind: str, value: Value | None = None, node: ast.Node | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.value = value  # what the failing function itself yields, if anything
        self.node = node  # the function call that failed


def like(text: str, pattern: str) -> bool:
    tokens: list[str] = []  # the pattern's characters, escapes resolved
    kinds: list[str] = []  # per token: "char", "one" (_) or "any" (%)
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern) and pattern[i + 1] in "%_":
            tokens.append(pattern[i + 1])
            kinds.append("char")
            i += 2
            continue
        tokens.append(pattern[i])
        kinds.append({"%": "any", "_": "one"}.get(pattern[i], "char"))
        i += 1

    @functools.cache
    def match(t: int, p: int) -> bool:
        if p == len(tokens):
            return t == len(text)
        if kinds[p] == "any":
            return match(t, p + 1) or (t < len(text) and match(t + 1, p))
        return t < len(text) and (kinds[p] == "one" or text[t] == tokens[p]) and match(t + 1, p + 1)

    return match(0, 0)


def checked(number: int) -> int:
    if not INT32_MIN <= number <= INT32_MAX:
        raise Failure("math")
    return number


def cast_to_type_of(value: Value, other: Value) -> Value:
    if isinstance(other, bool):
        return to_bool(value)
    if isinstance(other, int):
        return to_int(value)
    return to_str(value)


CASTS = {"String": to_str, "Integer": to_int, "Boolean": to_bool}
ZEROS: dict[str, Value] = {"String": "", "Integer": 0, "Boolean": False}


def interpret(node: ast.Node, event: dict[str, object]) -> Value:
    """Fail-fast evaluation, straight from the spec; raises Failure or EvaluationFailure."""
    if isinstance(node, ast.Literal):
        return node.value
    if isinstance(node, ast.Attribute):
        raw = None if node.name == "data" else event.get(node.name)
        if raw is None:
            raise Failure("missingAttribute")
        if isinstance(raw, bool | str):
            return raw
        if isinstance(raw, int) and INT32_MIN <= raw <= INT32_MAX:
            return raw
        raise Failure("generic")
    if isinstance(node, ast.Exists):
        return node.name != "data" and event.get(node.name) is not None
    if isinstance(node, ast.Unary):
        operand = interpret(node.operand, event)
        return (not to_bool(operand)) if node.operator == "NOT" else checked(-to_int(operand))
    if isinstance(node, ast.Chain):
        result = interpret(node.operands[0], event)
        for operator, right in zip(node.operators, node.operands[1:], strict=True):
            result = step(operator, result, right, event)
        return result
    if isinstance(node, ast.Like):
        matched = like(to_str(interpret(node.operand, event)), node.pattern)
        return matched is not node.negated
    if isinstance(node, ast.In):
        left = interpret(node.operand, event)
        for item in node.items:
            if cast_to_type_of(interpret(item, event), left) == left:
                return not node.negated
        return node.negated
    function = sql.BUILTINS.resolve(node.name, len(node.args))
    if function is None:
        raise Failure("missingFunction")
    args = []
    for index, arg in enumerate(node.args):
        value = interpret(arg, event)
        target = function.parameter_type(index)
        args.append(
            {"String": to_str, "Integer": to_int, "Boolean": to_bool}.get(target.value, lambda v: v)(value)
        )
    try:
        return function.implementation(*args)
    except FunctionError as error:
        raise Failure(error.kind, error.value, node) from None


def step(operator: str, left: Value, right_node: ast.Node, event: dict[str, object]) -> Value:
    if operator in ("AND", "OR"):
        decided = to_bool(left)
        if decided is (operator == "OR"):
            return decided
        return to_bool(interpret(right_node, event))
    if operator == "XOR":
        first = to_bool(left)
        return first != to_bool(interpret(right_node, event))
    if operator in ("=", "!=", "<>"):
        right = interpret(right_node, event)
        return (cast_to_type_of(left, right) == right) is (operator == "=")
    a = to_int(left)
    b = to_int(interpret(right_node, event))
    if operator in ("<", "<=", ">", ">="):
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[operator]
    if operator in ("/", "%") and b == 0:
        raise Failure("math")
    if operator == "/":
        quotient = abs(a) // abs(b)
        return checked(quotient if (a < 0) == (b < 0) else -quotient)
    if operator == "%":
        remainder = abs(a) % abs(b)
        return remainder if a >= 0 else -remainder
    return checked({"+": a + b, "-": a - b, "*": a * b}[operator])


def zero_of(node: ast.Node) -> Value:
    if isinstance(node, ast.Literal):
        return "" if isinstance(node.value, str) else False if isinstance(node.value, bool) else 0
    if isinstance(node, ast.Chain) and node.operators[0] in "+-*/%":
        return 0
    if isinstance(node, ast.Unary) and node.operator == "-":
        return 0
    if isinstance(node, ast.Call):
        function = sql.BUILTINS.resolve(node.name, len(node.args))
        if function is not None:
            return ZEROS[function.returns.value]
    return False


def reference(text: str, event: dict[str, object]) -> tuple[Value, list[str]]:
    tree = parse(text)
    try:
        return interpret(tree, event), []
    except Failure as failure:
        # A function's own failure value survives only when the call is the whole expression.
        if failure.node is tree and failure.value is not None:
            return failure.value, [failure.kind]
        return zero_of(tree), [failure.kind]
    except Exception as error:  # the shared casts raise the engine's own failure type
        return zero_of(tree), [getattr(error, "kind", "?")]


ATOMS = st.sampled_from(
    [
        "x", "y", "n", "b", "missing", "data", "0", "1", "-1", "7", "2147483647", "-2147483648",
        "'5'", "'abc'", "'true'", "'TRUE'", "''", "' 3'", "TRUE", "false",
    ]
)  # fmt: skip
PATTERNS = st.sampled_from(["'%'", "'a%'", "'%c'", "'_'", "'%b%'", "'a_c'", "'5'", "'tr%'", "'\\%%'"])


def compound(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.sampled_from(
        ["AND", "OR", "XOR", "=", "!=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"]
    )
    return st.one_of(
        st.builds(lambda a, op, b: f"({a}) {op} ({b})", children, binary, children),
        st.builds(
            lambda a, op, b, op2, c: f"{a} {op} {b} {op2} {c}", children, binary, children, binary, children
        ),
        st.builds(lambda a: f"NOT ({a})", children),
        st.builds(lambda a: f"-({a})", children),
        st.builds(lambda a, p: f"({a}) LIKE {p}", children, PATTERNS),
        st.builds(lambda a, p: f"({a}) NOT LIKE {p}", children, PATTERNS),
        st.builds(lambda a, b, c: f"({a}) IN ({b}, {c})", children, children, children),
        st.builds(lambda a, b: f"({a}) NOT IN ({b})", children, children),
        st.builds(lambda name: f"EXISTS {name}", st.sampled_from(["x", "missing", "data"])),
        st.builds(
            lambda f, a: f"{f}({a})",
            st.sampled_from(
                ["ABS", "LENGTH", "UPPER", "LOWER", "TRIM", "INT", "BOOL", "STRING", "CONCAT", "NOPE"]
            ),
            children,
        ),
        st.builds(
            lambda f, a, b: f"{f}({a}, {b})",
            st.sampled_from(["LEFT", "RIGHT", "SUBSTRING", "CONCAT", "CONCAT_WS", "ABS"]),
            children,
            children,
        ),
        st.builds(
            lambda f, a, b, c: f"{f}({a}, {b}, {c})",
            st.sampled_from(["SUBSTRING", "CONCAT", "CONCAT_WS"]),
            children,
            children,
            children,
        ),
    )


EXPRESSIONS = st.recursive(ATOMS, compound, max_leaves=8)
EVENT_VALUES = st.one_of(
    st.sampled_from(["abc", "5", "-3", "true", "FALSE", "", "a_c", "%"]),
    st.integers(min_value=-5, max_value=5),
    st.sampled_from([2147483647, -2147483648]),
    st.booleans(),
    st.none(),
)
EVENTS = st.fixed_dictionaries({"x": EVENT_VALUES, "y": EVENT_VALUES, "n": EVENT_VALUES, "b": EVENT_VALUES})


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=EXPRESSIONS, event=EVENTS)
def test_compiled_expressions_agree_with_the_reference_interpreter(
    text: str, event: dict[str, object]
) -> None:
    """Property: for random well-formed expressions and events, the compiled form yields the
    same value and the same (first) error kind as a direct tree walk of the spec's rules."""
    try:
        compiled = sql.compile(text)
    except sql.ParseError as error:
        # Generated expressions are well-formed; only the limits may reject them.
        reason = error.reason
        compiled = None
    if compiled is None:
        assert "nested more than" in reason or "does not fit" in reason
        return
    result = compiled.evaluate(event)
    expected_value, expected_errors = reference(text, event)
    assert [error.kind for error in result.errors] == expected_errors, text
    assert type(result.value) is type(expected_value), text
    assert result.value == expected_value, text

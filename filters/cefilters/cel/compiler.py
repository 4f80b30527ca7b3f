"""A CEL parse tree (cel-python's lark grammar) compiled to nested closures, with its static cost.

Every node becomes a :class:`Node`: a closure ``run(frame)`` plus what the budget needs to know
before anything runs: ``cost`` (the steps one evaluation may take, macros counted with their
range's size, or :data:`ASSUMED_SIZE` members when that is not known from the text), ``depth``
and, for lists and maps, ``size`` (an upper bound on their members when the text tells it). At
run time only macro iterations count steps (an expression without macros costs what its text
costs, which the static check already bounded), and every string, bytes, list or map an
operation builds is checked against the output limit, so an ordinary filter pays nothing extra.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import lark

from .budget import Budget, CelCostError, CelEvaluationError, CelSyntaxError, Position
from .functions import FUNCTIONS, METHODS, pattern_factor, regex
from .literals import literal
from .macros import MACROS, SCAN_UNIT, Frame, MacroParts
from .nodes import Node, Run, built, constant, depth_of, index, located, logical, position_of
from .operators import ARITHMETIC, RELATIONS, negate, not_
from .shapes import Computed, Path, Record
from .values import TYPES, from_input, type_name

__all__ = ["ASSUMED_SIZE", "Frame", "Node", "compile_tree"]

ASSUMED_SIZE: Final = 10
"""Members assumed, in the static estimate, for a list or map whose size the text does not tell
(a variable's): the run-time step count bounds what it really holds."""

_MISSING: Final = object()
_SCANNING: Final = frozenset({"contains", "matches", "startsWith", "endsWith"})
"""Functions whose time grows with the text they read: they count steps for it (Frame.scan)."""


class _Compiler:
    """One compilation: the budget, the hidden names and the macro variables in scope."""

    def __init__(self, budget: Budget, hidden: frozenset[str]) -> None:
        self.budget = budget
        self.hidden = hidden
        self.bound: tuple[str, ...] = ()

    def fail(self, tree: lark.Tree[lark.Token] | lark.Token, message: str) -> CelSyntaxError:
        return CelSyntaxError("", message, position_of(tree))

    def node(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        # Rules with a single child pass through: descend in a loop, not by recursion, so
        # parentheses and the grammar's layers cost no Python stack.
        while True:
            children = tree.children
            if tree.data == "paren_expr" or (
                len(children) == 1
                and isinstance(children[0], lark.Tree)
                and tree.data not in ("list_lit", "map_lit", "ident_arg", "dot_ident_arg", "literal")
            ):
                child = children[0]
                assert isinstance(child, lark.Tree)
                tree = child
                continue
            break
        if depth > self.budget.max_depth:
            raise CelCostError(
                "",
                f"the expression is nested more than {self.budget.max_depth} levels deep",
                position_of(tree),
            )
        handler = getattr(self, f"rule_{tree.data}", None)
        if handler is None:
            raise self.fail(tree, f"unsupported CEL construct: {tree.data}")
        compiled: Node = handler(tree, depth + 1)
        return compiled

    def sub(self, child: lark.Tree[lark.Token] | lark.Token | None, depth: int) -> Node:
        if not isinstance(child, lark.Tree):
            raise CelSyntaxError("", "invalid CEL expression", None)
        return self.node(child, depth)

    def rule_literal(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        token = tree.children[0]
        assert isinstance(token, lark.Token)
        try:
            return constant(literal(token))
        except ValueError as error:
            raise self.fail(tree, f"invalid literal: {error}") from None

    def rule_expr(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        condition, then, otherwise = (self.sub(child, depth) for child in tree.children)
        position = position_of(tree)
        if condition.constant and type(condition.value) is bool:
            return then if condition.value else otherwise
        run_condition, run_then, run_otherwise = condition.run, then.run, otherwise.run

        def choose(frame: Frame) -> object:
            chosen = run_condition(frame)
            if chosen is True:
                return run_then(frame)
            if chosen is False:
                return run_otherwise(frame)
            raise CelEvaluationError("no such overload: the condition of ?: is not a bool", position)

        return Node(
            choose, 1 + condition.cost + max(then.cost, otherwise.cost), depth_of(condition, then, otherwise)
        )

    def _chain(self, tree: lark.Tree[lark.Token], depth: int) -> list[Node]:
        # a || b || c is left-recursive in the grammar; flatten it into one n-ary node.
        operands: list[lark.Tree[lark.Token]] = []
        while len(tree.children) == 2:
            left, right = tree.children
            assert isinstance(left, lark.Tree)
            assert isinstance(right, lark.Tree)
            operands.append(right)
            tree = left
        operands.append(tree)
        return [self.sub(operand, depth) for operand in reversed(operands)]

    def rule_conditionalor(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        return logical(self._chain(tree, depth), absorbing=True, position=position_of(tree))

    def rule_conditionaland(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        return logical(self._chain(tree, depth), absorbing=False, position=position_of(tree))

    def _binary(
        self, tree: lark.Tree[lark.Token], depth: int, table: Mapping[str, Callable[[object, object], object]]
    ) -> Node:
        operator_tree, right_tree = tree.children
        assert isinstance(operator_tree, lark.Tree)
        left = self.sub(operator_tree.children[0], depth)
        right = self.sub(right_tree, depth)
        operate = table[str(operator_tree.data)]
        position = position_of(operator_tree)
        run_left, run_right = left.run, right.run
        grows = operator_tree.data == "addition_add"
        # `in` and `==` over lists visit every member: count them as a text search counts
        # characters (one step per SCAN_UNIT / 64 = 16 members).
        visits = operator_tree.data in ("relation_in", "relation_eq", "relation_ne")

        def binary(frame: Frame) -> object:
            left_value, right_value = run_left(frame), run_right(frame)
            if grows:
                # Count what a concatenation builds before building it.
                kind = type(left_value)
                if (kind is str or kind is bytes or kind is list) and kind is type(right_value):
                    frame.build(built(left_value) + built(right_value), position)
            elif visits and type(right_value) is list and len(right_value) >= 16:
                frame.scan(64 * len(right_value), position)
            try:
                return operate(left_value, right_value)
            except CelEvaluationError as error:
                if error.position is None:
                    error.position = position
                raise

        size = left.size + right.size if grows and left.size is not None and right.size is not None else None
        return self._folded(
            Node(binary, 1 + left.cost + right.cost, depth_of(left, right), size), left, right
        )

    def _folded(self, node: Node, *operands: Node) -> Node:
        """``node`` computed once now when all its operands are constants (and it does not fail)."""
        if all(operand.constant for operand in operands):
            try:
                return constant(node.run(Frame({}, self.budget)), node.size)
            except CelEvaluationError:
                return node  # the error belongs to evaluation time
        return node

    def rule_relation(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        return self._binary(tree, depth, RELATIONS)

    def rule_addition(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        return self._binary(tree, depth, ARITHMETIC)

    def rule_multiplication(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        return self._binary(tree, depth, ARITHMETIC)

    def rule_unary(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        operator_tree, operand_tree = tree.children
        assert isinstance(operator_tree, lark.Tree)
        operand = self.sub(operand_tree, depth)
        apply = not_ if operator_tree.data == "unary_not" else negate
        run = operand.run
        return self._folded(
            Node(
                located(lambda frame: apply(run(frame)), position_of(tree)),
                1 + operand.cost,
                depth_of(operand),
            ),
            operand,
        )

    def rule_ident(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        token = tree.children[0]
        assert isinstance(token, lark.Token)
        return self.identifier(str(token), position_of(tree))

    rule_dot_ident = rule_ident

    def identifier(self, name: str, position: Position | None) -> Node:
        if name in self.bound:

            def local(frame: Frame) -> object:
                return frame.locals[name]

            return Node(local, 1, 1)
        hidden = name in self.hidden
        type_value = TYPES.get(name)

        def variable(frame: Frame) -> object:
            value = _MISSING if hidden else frame.variables.get(name, _MISSING)
            if type(value) is str:
                return value
            if value is _MISSING or value is None and name not in frame.variables:
                if type_value is not None:
                    return type_value
                raise CelEvaluationError(f"undeclared reference to {name!r}", position)
            try:
                return from_input(name, value)
            except CelEvaluationError as error:
                error.position = position
                raise

        return Node(variable, 1, 1, shape=None if hidden else Path(name, ()))

    def rule_member_dot(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        target_tree, field = tree.children
        target = self.sub(target_tree, depth)
        name = str(field)
        position = position_of(field) or position_of(tree)
        run = target.run

        def select(frame: Frame) -> object:
            value = run(frame)
            if isinstance(value, dict):
                if name in value:
                    return value[name]
                raise CelEvaluationError(f"no such key: {name!r}", position)
            raise CelEvaluationError(
                f"no such field {name!r} on a value of type {type_name(value)}", position
            )

        shape = target.shape
        if isinstance(shape, Path):
            path = Path(shape.root, (*shape.names, name))
            return Node(_read(path, select), 1 + target.cost, depth_of(target), shape=path)
        return Node(select, 1 + target.cost, depth_of(target))

    def rule_member_index(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        target = self.sub(tree.children[0], depth)
        key = self.sub(tree.children[1], depth)
        run_target, run_key = target.run, key.run
        position = position_of(tree)

        def at(frame: Frame) -> object:
            return index(run_target(frame), run_key(frame), position)

        shape, name = target.shape, key.value
        if isinstance(shape, Path) and key.constant and isinstance(name, str) and type(name) is str:
            path = Path(shape.root, (*shape.names, name))
            return Node(_read(path, at), 1 + target.cost + key.cost, depth_of(target, key), shape=path)
        return self._folded(Node(at, 1 + target.cost + key.cost, depth_of(target, key)), target, key)

    def arguments(self, tree: lark.Tree[lark.Token] | lark.Token | None) -> list[lark.Tree[lark.Token]]:
        if tree is None:
            return []
        assert isinstance(tree, lark.Tree)
        return [child for child in tree.children if isinstance(child, lark.Tree)]

    def rule_list_lit(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        members = [
            self.sub(child, depth) for child in self.arguments(tree.children[0] if tree.children else None)
        ]
        runs = [member.run for member in members]
        position = position_of(tree)
        built = 8 * len(runs)

        def build(frame: Frame) -> object:
            frame.build(built, position)
            return [run(frame) for run in runs]

        node = Node(build, 1 + sum(m.cost for m in members), depth_of(*members), len(members))
        return self._folded(node, *members)

    def rule_map_lit(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        parts = [
            self.sub(child, depth) for child in self.arguments(tree.children[0] if tree.children else None)
        ]
        pairs = list(zip(parts[0::2], parts[1::2], strict=True))
        runs = [(key.run, value.run) for key, value in pairs]
        position = position_of(tree)
        built = 16 * len(runs)
        names = [key.value for key, _ in pairs if key.constant and type(key.value) is str]
        if len(names) == len(pairs) and len(set(names)) == len(names):
            # The usual literal, {"name": value, ...}: its keys are known strings and distinct,
            # so nothing about them is checked again on every evaluation.
            named = [(name, value.run) for name, (_, value) in zip(names, pairs, strict=True)]
            named_shapes = [
                (str(name), value.shape or Computed(value.run))
                for name, (_, value) in zip(names, pairs, strict=True)
            ]

            def build_named(frame: Frame) -> object:
                frame.build(built, position)
                return {name: run(frame) for name, run in named}

            cost = 1 + sum(p.cost for p in parts)
            record = Record(tuple(named_shapes))
            node = Node(build_named, cost, depth_of(*parts), len(pairs), shape=record)
            return self._folded(node, *parts)

        def build(frame: Frame) -> object:
            frame.build(built, position)
            result: dict[object, object] = {}
            for run_key, run_value in runs:
                key = run_key(frame)
                if type(key) not in (str, int, bool) and not isinstance(key, int):
                    raise CelEvaluationError(f"a map key cannot be of type {type_name(key)}", position)
                if key in result:
                    raise CelEvaluationError(f"the map literal has the key {key!r} twice", position)
                result[key] = run_value(frame)
            return result

        node = Node(build, 1 + sum(p.cost for p in parts), depth_of(*parts), len(pairs))
        return self._folded(node, *parts)

    def rule_member_object(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        raise self.fail(tree, "message construction (Type{field: value}) is not supported")

    def rule_ident_arg(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        name_token = tree.children[0]
        assert isinstance(name_token, lark.Token)
        name = str(name_token)
        arguments = self.arguments(tree.children[1] if len(tree.children) > 1 else None)
        if name == "has":
            return self.has(tree, arguments, depth)
        return self.call(tree, name, FUNCTIONS.get(name), [self.sub(a, depth) for a in arguments])

    rule_dot_ident_arg = rule_ident_arg

    def rule_member_dot_arg(self, tree: lark.Tree[lark.Token], depth: int) -> Node:
        target_tree, name_token = tree.children[0], tree.children[1]
        name = str(name_token)
        arguments = self.arguments(tree.children[2] if len(tree.children) > 2 else None)
        macro = MACROS.get(name)
        if macro is not None:
            return self.macro(tree, name, target_tree, arguments, depth)
        target = self.sub(target_tree, depth)
        return self.call(tree, name, METHODS.get(name), [target, *(self.sub(a, depth) for a in arguments)])

    def call(
        self, tree: lark.Tree[lark.Token], name: str, function: Callable[..., object] | None, args: list[Node]
    ) -> Node:
        position = position_of(tree)
        cost = 1 + sum(arg.cost for arg in args)
        if function is None:
            reason = f"no such function: {name}"

            def missing(frame: Frame) -> object:
                raise CelEvaluationError(reason, position)

            return Node(missing, cost, depth_of(*args))
        if name == "matches" and len(args) == 2 and args[1].constant and isinstance(args[1].value, str):
            try:
                pattern = regex(args[1].value)
            except CelEvaluationError as error:
                raise CelSyntaxError("", error.reason, position) from None
            run_text = args[0].run

            factor = pattern_factor(args[1].value)

            def search(frame: Frame) -> object:
                text = run_text(frame)
                if type(text) is str:
                    if len(text) * factor >= SCAN_UNIT:
                        frame.scan(len(text) * factor, position)
                    return pattern.search(text) is not None
                return located(lambda frame: function(text, pattern.pattern), position)(frame)

            return Node(search, cost, depth_of(*args))
        runs = [arg.run for arg in args]
        if len(runs) == 1:
            (only,) = runs

            def call_one(frame: Frame) -> object:
                try:
                    result = function(only(frame))
                except CelEvaluationError as error:
                    if error.position is None:
                        error.position = position
                    raise
                except (TypeError, ValueError, OverflowError) as error:  # a wrong number of arguments
                    raise CelEvaluationError(f"no such overload: {name}: {error}", position) from None
                if type(result) is str or type(result) is bytes:
                    frame.build(len(result), position)
                return result

            return self._folded(Node(call_one, cost, depth_of(*args)), *args)

        scans = name in _SCANNING

        def call_many(frame: Frame) -> object:
            values = [run(frame) for run in runs]
            if scans and isinstance(values[0], str):
                read = len(values[0])
                if name == "matches" and isinstance(values[1], str):
                    # A pattern known only at run time is compiled on every call: count that too.
                    read = read * pattern_factor(values[1]) + 64 * len(values[1])
                if read >= SCAN_UNIT:
                    frame.scan(read, position)
            try:
                return function(*values)
            except CelEvaluationError as error:
                if error.position is None:
                    error.position = position
                raise
            except (TypeError, ValueError, OverflowError) as error:
                raise CelEvaluationError(f"no such overload: {name}: {error}", position) from None

        return self._folded(Node(call_many, cost, depth_of(*args)), *args)

    def has(self, tree: lark.Tree[lark.Token], arguments: list[lark.Tree[lark.Token]], depth: int) -> Node:
        selection = arguments[0] if len(arguments) == 1 else None
        while (
            selection is not None
            and len(selection.children) == 1
            and isinstance(selection.children[0], lark.Tree)
        ):
            selection = selection.children[0]
        if (
            selection is not None
            and selection.data == "ident"
            and str(selection.children[0]) not in self.bound
        ):
            # has(name): whether the variable is bound (an event attribute is present).
            variable = str(selection.children[0])
            hidden = variable in self.hidden

            def present(frame: Frame) -> object:
                return not hidden and frame.variables.get(variable) is not None

            return Node(present, 1, 1)
        if selection is None or selection.data != "member_dot":
            raise self.fail(tree, "has() takes one field selection, such as has(a.b), or a variable name")
        target = self.sub(selection.children[0], depth)
        name = str(selection.children[1])
        run, position = target.run, position_of(tree)

        def has(frame: Frame) -> object:
            value = run(frame)
            if isinstance(value, dict):
                return name in value
            raise CelEvaluationError(f"has() on a value of type {type_name(value)}", position)

        return Node(has, 1 + target.cost, depth_of(target))

    def macro(
        self,
        tree: lark.Tree[lark.Token],
        name: str,
        target_tree: lark.Tree[lark.Token] | lark.Token,
        arguments: list[lark.Tree[lark.Token]],
        depth: int,
    ) -> Node:
        arity = (2, 3) if name == "map" else (2,)
        if len(arguments) not in arity:
            raise self.fail(tree, f"{name}() takes {' or '.join(map(str, arity))} arguments")
        variable = self.variable_name(arguments[0])
        target = self.sub(target_tree, depth)
        outer = self.bound
        self.bound = (*outer, variable)
        try:
            bodies = [self.sub(argument, depth) for argument in arguments[1:]]
        finally:
            self.bound = outer
        members = target.size if target.size is not None else ASSUMED_SIZE
        per_member = 1 + sum(body.cost for body in bodies)
        cost = 1 + target.cost + members * per_member
        if cost > self.budget.max_steps:
            raise CelCostError(
                "",
                f"the estimated cost, {cost} steps, is over the budget of {self.budget.max_steps}"
                f" ({name}() over {members}{'' if target.size is not None else ' (assumed)'} members"
                f" at {per_member} steps each)",
                position_of(tree),
            )
        parts = MacroParts(
            name, variable, target.run, tuple(body.run for body in bodies), per_member, position_of(tree)
        )
        size = target.size if name in ("map", "filter") else None
        return Node(MACROS[name](parts, self.budget), cost, depth_of(target, *bodies), size)

    def variable_name(self, tree: lark.Tree[lark.Token]) -> str:
        while len(tree.children) == 1 and isinstance(tree.children[0], lark.Tree):
            tree = tree.children[0]
        if tree.data == "ident":
            return str(tree.children[0])
        raise self.fail(tree, "a macro's first argument is a variable name")


def _read(path: Path, selections: Run) -> Run:
    """``path`` read in one step when the variable and every member on the way are maps that
    have the next name (what ``selections``, the selections one by one, give then); anything
    else runs ``selections``, which say what is wrong. A member read costs one closure call,
    not one per name plus the variable's."""
    root, names = path.root, path.names
    if len(names) == 1:
        (only,) = names

        def read_one(frame: Frame) -> object:
            value = frame.variables.get(root)
            if type(value) is dict:
                found = value.get(only, _MISSING)
                if found is not _MISSING:
                    return found
            return selections(frame)

        return read_one

    def read(frame: Frame) -> object:
        value = frame.variables.get(root)
        for name in names:
            if type(value) is not dict:
                return selections(frame)
            value = value.get(name, _MISSING)
        if value is _MISSING:
            return selections(frame)
        return value

    return read


def compile_tree(tree: lark.Tree[lark.Token], budget: Budget, hidden: frozenset[str]) -> Node:
    """The whole expression compiled; raises CelSyntaxError or CelCostError (path ``""``)."""
    node = _Compiler(budget, hidden).node(tree, 0)
    if node.cost > budget.max_steps:
        raise CelCostError(
            "", f"the estimated cost, {node.cost} steps, is over the budget of {budget.max_steps}"
        )
    return node

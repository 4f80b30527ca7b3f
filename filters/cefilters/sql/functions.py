"""CESQL functions: the function contract, the lookup table, and the built-ins (CESQL v1 §3.7).

A function is resolved by case-insensitive name and argument count. Arguments are cast to the
declared parameter types before the implementation runs (``Type.ANY`` passes them unchanged),
so implementations only see values of the types they declare.

An implementation signals a failure by raising ``FunctionError``; the call then yields
``FunctionError.value`` (the value "obvious" for that failure, e.g. ``ABS`` overflow yields
2147483647) or, when that is ``None``, the zero value of its return type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from cefilters.sql.errors import ErrorKind
from cefilters.sql.growth import MAX_STRING_LENGTH
from cefilters.sql.types import INT32_MAX, INT32_MIN, Type, Value, to_bool, to_int, to_str

__all__ = ["BUILTINS", "Function", "FunctionError", "FunctionTable"]


class FunctionError(Exception):
    """Raised by a function implementation: the call fails with ``kind`` and yields ``value``."""

    def __init__(
        self, message: str, value: Value | None = None, kind: ErrorKind = "functionEvaluation"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.value = value
        self.kind: ErrorKind = kind


@dataclass(frozen=True, slots=True)
class Function:
    """One function overload.

    ``parameters`` are the fixed parameters' types; ``variadic``, when set, is the type of any
    number of further arguments. ``pure`` functions with constant arguments are evaluated once,
    at compile time.
    """

    name: str
    parameters: tuple[Type, ...]
    returns: Type
    implementation: Callable[..., Value]
    variadic: Type | None = None
    pure: bool = False

    def accepts(self, arity: int) -> bool:
        """Whether a call with ``arity`` arguments resolves to this overload."""
        if self.variadic is None:
            return arity == len(self.parameters)
        return arity >= len(self.parameters)

    def parameter_type(self, index: int) -> Type:
        """The type argument ``index`` is cast to."""
        if index < len(self.parameters) or self.variadic is None:
            return self.parameters[index]
        return self.variadic


class FunctionTable:
    """An immutable set of overloads, keyed by upper-cased name.

    The spec's overloading rules are enforced when a table is built: one overload per name and
    arity, at most one variadic overload per name, and a variadic overload must take more fixed
    arguments than any fixed-arity overload of the same name has (so resolution is unambiguous).
    """

    def __init__(self, functions: Iterable[Function] = ()) -> None:
        self._overloads: dict[str, tuple[Function, ...]] = {}
        for function in functions:
            self._add(function)

    def _add(self, function: Function) -> None:
        name = function.name.upper()
        if not name.replace("_", "").isalpha() or not name[0].isalpha():
            raise ValueError(f"invalid function name {function.name!r}")
        existing = self._overloads.get(name, ())
        fixed_arities = [len(f.parameters) for f in (*existing, function) if f.variadic is None]
        variadics = [f for f in (*existing, function) if f.variadic is not None]
        if len(fixed_arities) != len(set(fixed_arities)):
            raise ValueError(f"{name} has two overloads with {len(function.parameters)} parameters")
        if len(variadics) > 1:
            raise ValueError(f"{name} has more than one variadic overload")
        if variadics and any(arity >= len(variadics[0].parameters) for arity in fixed_arities):
            raise ValueError(f"{name}: a variadic overload must take more fixed arguments than the others")
        self._overloads[name] = (*existing, function)

    def with_functions(self, *functions: Function) -> FunctionTable:
        """A new table holding this table's overloads plus ``functions``."""
        return FunctionTable((*self, *functions))

    def resolve(self, name: str, arity: int) -> Function | None:
        """The overload of ``name`` (any case) taking ``arity`` arguments, if any."""
        candidates = self._overloads.get(name.upper(), ())
        fixed = next((f for f in candidates if f.variadic is None and f.accepts(arity)), None)
        return fixed or next((f for f in candidates if f.accepts(arity)), None)

    def __iter__(self) -> Iterator[Function]:
        for overloads in self._overloads.values():
            yield from overloads

    def __reduce__(self) -> tuple[type[FunctionTable], tuple[tuple[Function, ...]]]:
        # Pickles when its implementations do (module-level functions, as the built-ins are).
        return (FunctionTable, (tuple(self),))


# Unicode White_Space: what TRIM strips. str.strip() would also strip U+001C..U+001F.
_WHITE_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def _bounded(name: str, length: int) -> None:
    """Refuse, before building it, a string longer than the budget (see cefilters.sql.growth)."""
    if length > MAX_STRING_LENGTH:
        raise FunctionError(
            f"over budget: {name} would build a string of {length} characters"
            f" (the budget is {MAX_STRING_LENGTH})",
            value="",
        )


def _concat(*parts: str) -> str:
    _bounded("CONCAT", sum(map(len, parts)))
    return "".join(parts)


def _concat_ws(separator: str, *parts: str) -> str:
    _bounded("CONCAT_WS", sum(map(len, parts)) + len(separator) * max(len(parts) - 1, 0))
    return separator.join(parts)


def _lower(text: str) -> str:
    _bounded("LOWER", 3 * len(text))
    return text.lower()


def _upper(text: str) -> str:
    _bounded("UPPER", 3 * len(text))
    return text.upper()


def _trim(text: str) -> str:
    return text.strip(_WHITE_SPACE)


def _left(text: str, count: int) -> str:
    if count < 0:
        raise FunctionError(f"LEFT: negative length {count}", value=text)
    return text[:count]


def _right(text: str, count: int) -> str:
    if count < 0:
        raise FunctionError(f"RIGHT: negative length {count}", value=text)
    return text[len(text) - count :] if count < len(text) else text


def _start(text: str, position: int) -> int:
    """0-based start for SUBSTRING's 1-based (or, when negative, from-the-end) position."""
    if position > len(text) or position < -len(text):
        raise FunctionError(f"SUBSTRING: position {position} is outside a string of length {len(text)}")
    return position - 1 if position > 0 else len(text) + position


def _substring(text: str, position: int) -> str:
    if position == 0:
        return ""
    return text[_start(text, position) :]


def _substring_length(text: str, position: int, length: int) -> str:
    if length < 0:
        raise FunctionError(f"SUBSTRING: negative length {length}")
    if position == 0:
        return ""
    start = _start(text, position)
    return text[start : start + length]


def _abs(number: int) -> int:
    if number == INT32_MIN:
        raise FunctionError("ABS: |-2147483648| overflows 32 bits", value=INT32_MAX, kind="math")
    return abs(number)


_S, _I, _B, _A = Type.STRING, Type.INTEGER, Type.BOOLEAN, Type.ANY

BUILTINS: Final = FunctionTable(
    [
        Function("LENGTH", (_S,), _I, len, pure=True),
        Function("CONCAT", (), _S, _concat, variadic=_S, pure=True),
        Function("CONCAT_WS", (_S,), _S, _concat_ws, variadic=_S, pure=True),
        Function("LOWER", (_S,), _S, _lower, pure=True),
        Function("UPPER", (_S,), _S, _upper, pure=True),
        Function("TRIM", (_S,), _S, _trim, pure=True),
        Function("LEFT", (_S, _I), _S, _left, pure=True),
        Function("RIGHT", (_S, _I), _S, _right, pure=True),
        Function("SUBSTRING", (_S, _I), _S, _substring, pure=True),
        Function("SUBSTRING", (_S, _I, _I), _S, _substring_length, pure=True),
        Function("ABS", (_I,), _I, _abs, pure=True),
        # Casting functions: used by the spec's examples and the conformance suite.
        Function("INT", (_A,), _I, to_int, pure=True),
        Function("BOOL", (_A,), _B, to_bool, pure=True),
        Function("STRING", (_A,), _S, to_str, pure=True),
    ]
)
"""The built-in functions of CESQL v1 plus the casting functions ``INT``, ``BOOL``, ``STRING``."""

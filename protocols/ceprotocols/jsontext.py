"""JSON text as every way into the broker reads it: one parser with one set of limits.

HTTP bodies, registry documents and protocol messages are all read by :func:`loads`, so a
value accepted on one way in is accepted on every other and can be written back by every JSON
writer the broker uses. The limits:

* **nesting**: at most :data:`MAX_DEPTH` levels of arrays and objects (``[]`` is one level);
  deeper text is refused rather than parsed by recursion that could exhaust the stack;
* **text**: the input is UTF-8; every string (member names included) is Unicode text, so a
  ``\\ud800`` escape of an unpaired surrogate, which no UTF-8 text can hold, is refused;
* **members**: each object names a member once (a repeated name would silently drop a value);
* **numbers**: finite (no ``NaN``, ``Infinity`` or ``1e400``); integers fit in 64 bits, signed
  or unsigned (a larger one could not be written back without losing digits).

A refusal is a :class:`JsonTextError` that names the limit and, as a path of member names and
array indexes, where in the document it was broken.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

__all__ = ["INT_MAX", "INT_MIN", "MAX_DEPTH", "JsonTextError", "check", "depth", "loads"]

#: Deepest nesting of arrays and objects accepted anywhere (below the 255 levels the broker's
#: fastest JSON writer can serialise, so every accepted value can be written back).
MAX_DEPTH: Final = 128
#: Integers outside this range (signed 64 bits to unsigned 64 bits) are refused.
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**64 - 1
#: Longest piece of input quoted back in a reason.
_QUOTE = 40

#: Only these escapes can produce a surrogate code point; text without them needs no check.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")

Path = tuple[str | int, ...]


class JsonTextError(ValueError):
    """JSON text that is malformed or breaks a limit.

    Attributes:
        reason: what is wrong, without the offending value when it could not be shown safely.
        path: member names and array indexes leading to the offending value (empty: the whole
            text, e.g. a syntax error).
        limit: the limit broken (``nesting``, ``text``, ``members``, ``numbers``), or ``syntax``.
    """

    def __init__(self, reason: str, *, limit: str, path: Path = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.limit = limit
        self.path = path

    def at(self, prefix: Path) -> JsonTextError:
        """The same error, located under ``prefix``."""
        return JsonTextError(self.reason, limit=self.limit, path=prefix + self.path)


def _shown(text: str) -> str:
    cut = text if len(text) <= _QUOTE else text[: _QUOTE - 3] + "..."
    return ascii(cut)  # escapes surrogates and control characters


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"the member {_shown(key)} appears twice in one object", "members")
            seen.add(key)
    return result


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number", "numbers")


class _Refused(ValueError):
    """Raised inside the parser's hooks; becomes a JsonTextError."""

    def __init__(self, reason: str, limit: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.limit = limit


#: Every object passes a Python hook that refuses a repeated member name. (Running Python code
#: for each object also lets other threads take the interpreter in between, so a large text can
#: be parsed on a worker thread without holding up the event loop.)
#: Numbers are parsed in C; their range is checked afterwards, with the place (see check).
_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_constant=_constant)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse ``data`` (UTF-8 bytes or text) within the limits of this module.

    Raises:
        JsonTextError: the text is malformed or breaks a limit.
    """
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonTextError(f"the text is not valid UTF-8 (byte {exc.start})", limit="text") from None
    if text.startswith("\ufeff"):
        raise JsonTextError("the text starts with a byte order mark", limit="text")
    value = _decode(text)
    surrogates = _SURROGATE_ESCAPE.search(text) is not None
    check(value, strings=surrogates or (isinstance(data, str) and not _is_text(text)))
    return value


def _decode(text: str) -> Any:
    try:
        return _DECODER.decode(text)
    except _Refused as exc:
        raise JsonTextError(exc.reason, limit=exc.limit) from None
    except json.JSONDecodeError as exc:
        if exc.msg == "Expecting value" and not text.strip():
            raise JsonTextError("there is no JSON value (the text is empty)", limit="syntax") from None
        raise JsonTextError(
            f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", limit="syntax"
        ) from None
    except RecursionError:
        raise JsonTextError(_too_deep(), limit="nesting") from None
    except ValueError:  # Python's own limit on the digits of an integer
        raise JsonTextError(
            "an integer has thousands of digits; it does not fit in 64 bits", limit="numbers"
        ) from None


def _fits(container: dict[str, Any] | list[Any], level: int) -> bool:
    """Whether ``container`` keeps the nesting and number limits: the fast check, without a
    path (:func:`_walk` finds where the problem is when this says no)."""
    if level > MAX_DEPTH:
        return False
    for item in container.values() if isinstance(container, dict) else container:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is dict or kind is list:
            if not _fits(item, level + 1):
                return False
        elif kind is int:
            if item < INT_MIN or item > INT_MAX:
                return False
        elif kind is float and not math.isfinite(item):
            return False
    return True


def _too_deep() -> str:
    return f"arrays and objects are nested more than {MAX_DEPTH} levels deep"


def check(value: Any, *, strings: bool = True, level: int = 0) -> None:
    """Raise :class:`JsonTextError` unless the parsed JSON ``value`` keeps the limits.

    ``level`` is how deeply ``value`` itself is nested in its document (0: it is the document);
    ``strings=False`` skips the Unicode check of strings (for values parsed from text that
    holds no surrogate escape).
    """
    kind = type(value)
    if kind is dict or kind is list:
        if not strings and _fits(value, level + 1):
            return
        problem = _walk(value, level + 1, strings)
        if problem is not None:
            raise problem
        return
    problem = _scalar(value, strings)
    if problem is not None:
        raise problem


def _scalar(value: Any, strings: bool) -> JsonTextError | None:
    kind = type(value)
    if kind is str:
        if strings and not _is_text(value):
            return JsonTextError(_NOT_TEXT, limit="text")
    elif kind is int:
        if not INT_MIN <= value <= INT_MAX:
            return JsonTextError("the integer does not fit in 64 bits", limit="numbers")
    elif kind is float and not math.isfinite(value):
        return JsonTextError("the number is not finite", limit="numbers")
    return None


_NOT_TEXT = "the string is not Unicode text (it holds an unpaired surrogate, which UTF-8 cannot encode)"


def _is_text(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _walk(container: dict[str, Any] | list[Any], level: int, strings: bool) -> JsonTextError | None:
    """The first problem at or below ``container`` (nested ``level`` deep), or None. Written
    for speed: it runs over every value of every body, and most values are short strings."""
    if level > MAX_DEPTH:
        return JsonTextError(_too_deep(), limit="nesting")
    pairs: Any = container.items() if isinstance(container, dict) else enumerate(container)
    for key, item in pairs:
        if strings and type(key) is str and not _is_text(key):
            return JsonTextError("a member name is not Unicode text", limit="text", path=(key,))
        kind = type(item)
        if kind is str:
            if not strings or _is_text(item):
                continue
            problem: JsonTextError | None = JsonTextError(_NOT_TEXT, limit="text")
        elif kind is dict or kind is list:
            problem = _walk(item, level + 1, strings)
        elif kind is bool or item is None:
            continue
        else:
            problem = _scalar(item, strings)
        if problem is not None:
            return problem.at((key,))
    return None


def depth(value: Any) -> int:
    """How many levels of arrays and objects ``value`` nests (0 for a scalar)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, level + 1) for child in item)
        else:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
    return deepest

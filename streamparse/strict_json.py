"""Strict JSON (RFC 8259, I-JSON): reading a value at native speed (jiter) and saying why one is refused.

`strict_value` reads the value at a position, in one jiter pass when the scanner knows where it
should end; `decode_exact` reads an exact slice; `StrictDecoder`/`DECODER` give the same as
`json.JSONDecoder.raw_decode`; `strict_loads` as `json.loads`. Python's C decoder with hooks
(`_Explainer`) runs only to explain a refusal; `LENIENT_DECODER` only finds where a value ends.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable
from typing import Any, NoReturn

import jiter


class _NotStrict(ValueError):
    """Raised from the decoder's hooks: the text is JSON to Python's lenient reader, not to RFC 8259."""


def _reject_constant(name: str) -> Any:
    raise _NotStrict(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value - value != 0:  # inf (NaN cannot be written as a JSON number)
        raise _NotStrict(f"the number {text[:30]}{'...' if len(text) > 30 else ''} is too large for a double")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise _NotStrict(f"duplicate key {twice[:60]!r}")
    return members


def _lone_surrogate(value: Any) -> str | None:
    """A string (key or value) in decoded JSON that holds a lone surrogate, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not encodable(item):
                return item
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def encodable(text: str) -> bool:
    """Whether `text` can be written as UTF-8: it holds no lone surrogate (escaped JSON `\\ud800` decodes to one)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class NotStrictJSON(json.JSONDecodeError):
    """JSON that Python's lenient reader takes and RFC 8259 does not (or that nests too deeply)."""


class _Explainer(json.JSONDecoder):
    """Python's C JSON decoder with hooks that raise on what RFC 8259 refuses: run only where jiter
    refused a value, to say why in the words of `NotStrictJSON` (and at Python's positions)."""

    scan_once: Callable[[str, int], tuple[Any, int]]  # set by JSONDecoder: the C scanner

    def __init__(self) -> None:
        super().__init__(parse_constant=_reject_constant, parse_float=_finite_float,
                         object_pairs_hook=_unique_keys)

    def explain(self, s: str, idx: int, refusal: str) -> NoReturn:
        """Raise the error that says why the value at `s[idx]` is not strict JSON; `refusal` is
        jiter's word for it, said where Python's decoder takes the value (deeper nesting)."""
        try:
            value, end = self.scan_once(s, idx)
        except StopIteration as error:
            raise json.JSONDecodeError("Expecting value", s, error.value) from None
        except _NotStrict as error:
            raise NotStrictJSON(str(error), s, idx) from None
        except RecursionError:
            raise NotStrictJSON("nested too deeply", s, idx) from None
        bad = _lone_surrogate(value) if encodable(s[idx:end]) else s[idx:end]
        if bad is not None:
            shown = bad[:40].encode("utf-8", "backslashreplace").decode("ascii", "replace")
            raise NotStrictJSON(f'a lone surrogate (not a Unicode character) in "{shown}"', s, idx)
        if "recursion limit" in refusal:
            raise NotStrictJSON("nested too deeply", s, idx)
        raise NotStrictJSON(f"not strict JSON: {refusal}", s, idx)


_EXPLAINER = _Explainer()


def decode_exact(text: str, start: int, end: int, keys_checked: bool = False, overflow_checked: bool = False) -> Any:
    """The strict JSON value that is exactly `text[start:end]` (no space around it), read by jiter
    at native speed: duplicate keys at any depth, NaN and Infinity, lone surrogates (escaped or
    raw) and nesting deeper than about 200 are refused (`ValueError`, jiter's words). The one rule
    jiter leaves, a number that overflows a double, is checked here (`overflows`), unless
    `overflow_checked` (the caller checks the text around it once, as for a call list's elements).
    With `keys_checked` (a strict pass already read this very value whole), keys are not checked
    again (a third of jiter's cost). Only keys go through jiter's string cache: argument values
    are mostly new strings, and caching them cost a tenth of the read of a many-valued object."""
    data = text[start:end].encode()  # a raw lone surrogate: UnicodeEncodeError, a ValueError
    value = jiter.from_json(data, allow_inf_nan=False, catch_duplicate_keys=not keys_checked, cache_mode="keys")
    if not overflow_checked and _overflows(value, data):
        raise ValueError("a number too large for a double")
    return value


# Where a number may overflow to infinity (its integer digits and positive exponent add to 309 or
# more): an exponent of three digits or more, or a run of more than 200 digits. The text's bytes are
# mapped to their shapes at C speed (each digit `0`, `e` and `E` to `e`, `+` dropped, anything else
# a space) and the shapes searched for those two literals.
_SHAPES = bytes(ord("0") if b in b"0123456789" else ord("e") if b in b"eE" else ord(" ") for b in range(256))
_RUN = 200
_EXPONENT, _DIGIT_RUN = b"0e000", b"0" * _RUN
_WALK_BUDGET = 16  # values looked at before the text is searched instead
_SHORT = 1024  # bytes of text searched rather than walked at all


def overflows(value: Any, text: str, start: int, end: int) -> bool:
    """Whether `value`, read from `text[start:end]`, holds a float that overflowed to infinity.
    Cost: a search of the text's number shapes (of a long text, only after a walk of
    `_WALK_BUDGET` values did not see all: most long arguments are a few strings), and only where
    a number that large may be written a walk of it all."""
    return _overflows(value, text[start:end].encode("utf-8", "replace"))


def _overflows(value: Any, data: bytes) -> bool:
    """`overflows`, given the UTF-8 text the value was read from."""
    if len(data) > _SHORT:
        found = _infinity_in(value, _WALK_BUDGET)
        if found is not None:
            return found
    shapes = data.translate(_SHAPES, b"+")
    if _EXPONENT not in shapes and (len(data) < _RUN or _DIGIT_RUN not in shapes):
        return False
    return bool(_infinity_in(value, -1))


def _infinity_in(value: Any, budget: int) -> bool | None:
    """Whether a float in `value` is infinite; None when more than `budget` values (-1: no bound)
    would have to be looked at."""
    stack = [value]
    pop, push = stack.pop, stack.extend
    while stack:
        if budget == 0:
            return None
        budget -= 1
        item = pop()
        kind = type(item)
        if kind is dict:
            push(item.values())
        elif kind is list:
            push(item)
        elif kind is float and item - item != 0:
            return True
    return False


def _explain(text: str, pos: int, error: ValueError) -> NoReturn:
    _EXPLAINER.explain(text, pos, str(error))


_TRAILING = re.compile(r"trailing characters at line (\d+) column (\d+)")


def _value_end_from(error: ValueError, text: str, pos: int, end: int) -> int | None:
    """Where the value of `text[pos:end]` ends, when jiter refused that slice only for what follows
    the value."""
    after = trailing_at(error, text, pos, end)
    return None if after is None else space_back(text, pos, after)


def trailing_at(error: ValueError, text: str, pos: int, end: int) -> int | None:
    """Where the first character after the value of `text[pos:end]` and its whitespace is, when
    jiter refused that slice only for it (its message gives that character's line and byte column);
    None for any other refusal."""
    found = _TRAILING.match(str(error))
    if found is None:
        return None
    line, column = int(found.group(1)), int(found.group(2))
    at = pos if line == 1 else end - len(text[pos:end].split("\n", line - 1)[-1])  # where that line starts
    width = column - 1  # bytes into the line
    return at + width if text.isascii() else at + len(text[at:end].encode()[:width].decode(errors="ignore"))


def value_end(text: str, pos: int, end: int) -> int:
    """Where the JSON value at `text[pos]` ends, within `text[:end]`, when other text may follow it
    there (an element of a list already read strictly): one jiter pass without the strictness
    checks, whose refusal of what follows says where the value ended; the C decoder where that
    pass refuses the value itself. Cost: about two thirds of a strict read of the value, plus a
    copy of `text[pos:end]`."""
    try:
        jiter.from_json(text[pos:end].encode(), cache_mode="none")
    except ValueError as error:
        found = _value_end_from(error, text, pos, end)
        if found is not None:
            return found
    else:
        return space_back(text, pos, end)
    return LENIENT_DECODER.raw_decode(text, pos)[1]


def space_back(text: str, lo: int, end: int) -> int:
    """Where the JSON whitespace that ends at `end` starts (not before `lo`)."""
    while end > lo and text[end - 1] in " \t\n\r":
        end -= 1
    return end


def strict_value(text: str, pos: int, limit: int | None = None) -> tuple[Any, int]:
    """The strict JSON value at `text[pos]` and where it ends; `NotStrictJSON` or
    `json.JSONDecodeError` (ValueErrors) say why it is not one.

    `limit` is where a scanner expects the value to end (a closer, a stop, the end of the body),
    JSON whitespace allowed before it: the value is then read in one pass by jiter when that is so,
    or when an object or list ends at the last `}` or `]` before `limit` (DeepSeek's fence after
    it); in a second when other text follows the value. Without it, or where the value
    is not that slice, the C decoder finds where it ends (without the strictness hooks) and jiter
    reads exactly that. Cost: one jiter pass over the value, plus one C decoder pass without a
    `limit`; the hooks' decoder runs only to explain a refusal."""
    if limit is not None:
        end = space_back(text, pos, limit)
        closer = _CLOSER_OF.get(text[pos:pos + 1])
        if closer is not None and not text.startswith(closer, end - 1):  # text follows the value (a fence)
            end = max(text.rfind(closer, pos, end) + 1, pos + 1)  # a container ends at its closer: the last one
        try:
            return decode_exact(text, pos, end), end
        except ValueError as error:
            found = _value_end_from(error, text, pos, end)
        if found is not None:  # jiter read the value strictly to its end, then refused what follows
            try:
                return decode_exact(text, pos, found, keys_checked=True), found
            except ValueError as error:
                _explain(text, pos, error)
    try:
        end = LENIENT_DECODER.raw_decode(text, pos)[1]
    except (ValueError, RecursionError) as error:
        _explain(text, pos, ValueError(str(error)))
    try:
        return decode_exact(text, pos, end), end
    except ValueError as error:
        _explain(text, pos, error)


_CLOSER_OF = {"{": "}", "[": "]"}


class StrictDecoder(json.JSONDecoder):
    """`raw_decode` held to RFC 8259 (I-JSON, RFC 7493): NaN and Infinity, numbers that overflow a
    double, lone surrogates (escaped or raw, in keys or values), duplicate keys at any depth and
    nesting deeper than about 200 raise `json.JSONDecodeError` saying which (`strict_value`)."""

    def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
        return strict_value(s, idx)


DECODER = StrictDecoder()
# Only for finding where a JSON value ends (a scanner skipping a whole value at C speed, where no
# strict reading of it is kept or the strict one failed): the same extent as DECODER's, without the
# strictness hooks. Never for reading a value.
LENIENT_DECODER = json.JSONDecoder()


# The writer of the `arguments_json` a kind builds from values it read (tagged parameters, pythonic
# literals): `json.dumps(value, ensure_ascii=False)`, with one shared encoder and no circular check
# (read data holds no cycle; the check keeps a dict entry per container, a fifth of the cost).
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False)


def json_text(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False)` of read data (finite numbers; `ValueError` otherwise)."""
    return _ENCODER.encode(value)


def strict_loads(text: str) -> Any:
    """`json.loads` held to the rules of `DECODER`; raises `json.JSONDecodeError` (a ValueError)."""
    start = _SPACE.match(text).end()  # type: ignore[union-attr]
    value, end = strict_value(text, start, len(text))
    end = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


_SPACE = re.compile(r"[ \t\n\r]*")


def entries(value: Any) -> int:
    """How many entries the containers of `value` hold at every depth (a dict's values, a list's
    items), counted at C speed: `gc.get_referents` of a list gives its items, of a dict with string
    keys its values (`ENTRIES_COUNTED` checks that this Python does so), of a string, a number,
    a bool or None nothing."""
    level = [value]
    total = 0
    while level:
        level = gc.get_referents(*level)
        total += len(level)
    return total


def _entries_counted() -> bool:
    """Whether `entries` counts as it says on this Python (CPython does), on jiter's containers."""
    value = jiter.from_json(b'{"a": 1, "b": [2.5, "c", null, {}], "d": {"e": true}}')
    return gc.get_referents(value, "f", 3, 1.5, True) == [1, [2.5, "c", None, {}], {"e": True}] \
        and entries(value) == 8


ENTRIES_COUNTED = _entries_counted()

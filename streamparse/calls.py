"""Reading a JSON call object (`{"name", "arguments"}`), shared by the JSON formats."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]  # the C string scanner
from typing import Any

from .spec import CallResult, ParsedCall, Rejection
from .strict_json import DECODER, LENIENT_DECODER, NotStrictJSON, space_back, strict_loads, strict_value
from .types import INVALID_JSON

ARGUMENT_KEYS = ("arguments", "parameters")
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")


def object_members(text: str, pos: int, limit: int | None = None) -> tuple[list[tuple[str, Any, str]], int] | None:
    """The members of the JSON object at `text[pos]` as `(key, value, raw value text)`, and where
    it ends; None when it is not one complete, strict object (a key written twice included: the
    grammar's members then say which).

    The fast path for what a grammar's `call_object` rule reads: the whole object is read by jiter
    in one pass (`grammar.strict_value`; `limit`: where the scanner expects it to end), then the
    raw text of each member is cut out by a walk of the top level only (`_members`)."""
    if not text.startswith("{", pos):
        return None
    try:
        value, end = strict_value(text, pos, limit)
    except (ValueError, RecursionError):
        return None
    return members_of(text, pos, end, value), end


def members_of(text: str, pos: int, end: int, value: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """`(key, value, raw value text)` of each member of the object `text[pos:end]`, which jiter read
    as `value` (strict JSON, no key twice). A key, with the `{` or `,` and the `:` around it, is
    one regex match where it has no escapes (else read by the C string scanner); strings and
    scalars are stepped over; a container's end is the object's own end when it is the last member,
    is found walking back over the scalar members after it, and only otherwise by the C decoder."""
    count = len(value)
    if count == 2:  # the common call object, `{"name": "…", "arguments": {…}}`: one match, no loop
        pair = _STRING_THEN_KEY.match(text, pos)
        if pair is not None:
            first, second = pair.group(1, 3)
            if first != second and first in value and second in value:  # (escaped keys: no match)
                return [(first, value[first], pair.group(2)),
                        (second, value[second], text[pair.end():space_back(text, pair.end(), end - 1)])]
    members: list[tuple[str, Any, str]] = []
    key_at = _FIRST_KEY
    for index in range(count):
        found = key_at.match(text, pos)
        if found is not None:
            key, start = found.group(1), found.end()
        else:  # a key with escapes
            key, pos = _scanstring(text, _KEY_START.match(text, pos).end(), True)  # type: ignore[union-attr]
            start = _COLON.match(text, pos).end()  # type: ignore[union-attr]
        key_at = _NEXT_KEY
        item = value[key]
        if index == count - 1:
            stop = space_back(text, start, end - 1)
        elif isinstance(item, str):
            stop = _scanstring(text, start + 1, True)[1]
        elif not isinstance(item, (dict, list)):
            stop = _SCALAR.match(text, start).end()  # type: ignore[union-attr]
        elif all(not isinstance(later, (dict, list)) for later in list(value.values())[index + 1:]):
            stop = _before_scalars(text, start, end, count - index - 1)
        else:
            stop = LENIENT_DECODER.raw_decode(text, start)[1]
        members.append((key, item, text[start:stop]))
        pos = stop
    return members


# A member's key with what leads to it (the object's `{`, or the `,` after the member before) and
# the `:` after it, when the key has no escapes (its text is then the key); else where it opens.
_FIRST_KEY = re.compile(r'\{[ \t\n\r]*"([^"\\]*)"[ \t\n\r]*:[ \t\n\r]*')
_NEXT_KEY = re.compile(r'[ \t\n\r]*,[ \t\n\r]*"([^"\\]*)"[ \t\n\r]*:[ \t\n\r]*')
# An object's first member, when its value is a string, up to the second member's value: the two keys
# (groups 1 and 3, without escapes) and the first value's text (group 2). The object is strict JSON
# already (jiter read it), so a string is `"`, then characters that are not `"` or `\\`, or a
# backslash and the character it escapes, then `"` (unrolled: no backtracking).
_STRING_THEN_KEY = re.compile(r'\{[ \t\n\r]*"([^"\\]*)"[ \t\n\r]*:[ \t\n\r]*("[^"\\]*(?:\\.[^"\\]*)*")'
                              r'[ \t\n\r]*,[ \t\n\r]*"([^"\\]*)"[ \t\n\r]*:[ \t\n\r]*')
_KEY_START = re.compile(r'[ \t\n\r]*[{,][ \t\n\r]*"')
_SCALAR = re.compile(r"[-+.0-9eE]+|true|false|null")
_SCALAR_CHARS = frozenset("-+.0123456789eEtruefalsn")


def _before_scalars(text: str, lo: int, end: int, count: int) -> int:
    """Where the member value that `count` scalar members follow ends, in the strict object that ends
    at `end`: a walk back over those members (their values and keys, `:` and `,`)."""
    at = space_back(text, lo, end - 1)
    for _ in range(count):
        at = space_back(text, lo, _token_start(text, at)) - 1  # the value, then its `:`
        at = space_back(text, lo, _token_start(text, space_back(text, lo, at))) - 1  # the key, then `,`
        at = space_back(text, lo, at)
    return at


def _token_start(text: str, end: int) -> int:
    """Where the string or scalar token of strict JSON that ends at `end` starts. A string's opening
    quote is the first quote back that no odd run of backslashes escapes."""
    if text[end - 1] != '"':
        at = end
        while text[at - 1] in _SCALAR_CHARS:
            at -= 1
        return at
    quote = end - 1
    while True:
        quote = text.rfind('"', 0, quote)
        slash = quote
        while text[slash - 1] == "\\":
            slash -= 1
        if (quote - slash) % 2 == 0:
            return quote


def json_problem(text: str, pos: int) -> str | None:
    """What makes the JSON value at `text[pos]` unacceptable although its syntax is JSON's (NaN,
    an overflowing number, a lone surrogate, a duplicate key, nesting too deep), or None."""
    try:
        DECODER.raw_decode(text, pos)
    except NotStrictJSON as error:
        return error.msg
    except ValueError:
        return None
    return None


def arguments_of(value: Any, raw: str) -> tuple[dict[str, Any], str] | str:
    """The arguments and their JSON text, or an error message.

    An object is kept as the model wrote it; a JSON string holding an object (some models emit
    that) is accepted and its text is the arguments JSON."""
    if isinstance(value, dict):
        return value, raw
    if isinstance(value, str):
        try:
            inner = strict_loads(value)
        except json.JSONDecodeError as error:
            return f"arguments is a string that is not a JSON object: {error.msg}"
        if isinstance(inner, dict):
            return inner, value.strip()
        return "arguments is a string that does not hold a JSON object"
    return f"arguments must be a JSON object, got {type(value).__name__}"


def call_from_members(members: list[tuple[str, Any, str]], name_keys: tuple[str, ...] = ("name",),
                      argument_keys: tuple[str, ...] = ARGUMENT_KEYS, call_id: str | None = None) -> CallResult:
    """A call from the members of its JSON object: `(key, value, raw value text)` in order. The
    name is the first member under one of `name_keys`, the arguments the one under `argument_keys`;
    `call_id` is the id the body kind read (by its own keys).

    A member written twice, or two argument keys, reject the call: which one the model meant is
    unclear, and a stream that already sent the first could not take it back."""
    if len(members) == 2:  # the common call object: its name, then its arguments object
        (first, name, _), (second, arguments, raw) = members
        if (first in name_keys and second in argument_keys and first not in argument_keys
                and name.__class__ is str and name.strip() and arguments.__class__ is dict):
            return ParsedCall(name, arguments, raw, call_id)
    fields = {key: (value, raw) for key, value, raw in members}
    present = [key for key in argument_keys if key in fields]
    if len(present) > 1:
        return Rejection(INVALID_JSON, [f"$: the call object has both {present[0]!r} and {present[1]!r}; "
                                        "which one holds the arguments is unclear"])
    if len(fields) < len(members):
        seen: set[str] = set()
        twice = next(key for key, _, _ in members if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        return Rejection(INVALID_JSON, [f"$: the call object has {twice!r} more than once"])
    name = first_under(members, name_keys)
    if not isinstance(name, str) or not name.strip():
        return Rejection(INVALID_JSON, [f'$.{name_keys[0]}: the call object has no "{name_keys[0]}" string'])
    if not present:
        return ParsedCall(name, {}, "{}", call_id)
    arguments = arguments_of(*fields[present[0]])
    if isinstance(arguments, str):
        return Rejection(INVALID_JSON, [f"$.{present[0]}: {arguments}"], name=name.strip())
    return ParsedCall(name, arguments[0], arguments[1], call_id)


def first_under(members: list[tuple[str, Any, str]], keys: tuple[str, ...]) -> Any:
    """The value of the first member under one of `keys`, or None."""
    for key, value, _ in members:
        if key in keys:
            return value
    return None

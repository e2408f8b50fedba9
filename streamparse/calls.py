"""Reading a JSON call object (`{"name", "arguments"}`), shared by the JSON formats."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]  # the C string scanner
from typing import Any

from .grammar import DECODER, NotStrictJSON, encodable, strict_loads
from .spec import CallResult, ParsedCall, Rejection
from .types import INVALID_JSON

ARGUMENT_KEYS = ("arguments", "parameters")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")
_AFTER_MEMBER = re.compile(r"[ \t\n\r]*([,}])[ \t\n\r]*")


def object_members(text: str, pos: int) -> tuple[list[tuple[str, Any, str]], int] | None:
    """The members of the JSON object at `text[pos]` as `(key, value, raw value text)`, and where
    it ends; None when it is not one complete, valid object.

    The fast path for what a grammar's `call_object` rule reads: each key is read by the C string
    scanner, each value decoded by the C decoder (`DECODER`), and only the raw text of the values
    is cut out."""
    if not text.startswith("{", pos):
        return None
    members: list[tuple[str, Any, str]] = []
    pos = _JSON_SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text.startswith("}", pos):
        return members, pos + 1
    try:
        while True:
            if not text.startswith('"', pos):
                return None
            key, pos = _scanstring(text, pos + 1, True)
            if not key.isascii() and not encodable(key):  # a lone surrogate: not strict JSON
                return None
            colon = _COLON.match(text, pos)
            if colon is None:
                return None
            start = colon.end()
            value, pos = DECODER.raw_decode(text, start)
            members.append((key, value, text[start:pos]))
            after = _AFTER_MEMBER.match(text, pos)
            if after is None:
                return None
            if after.group(1) == "}":
                return members, after.start(1) + 1
            pos = after.end()
    except (ValueError, RecursionError):
        return None


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
                      argument_keys: tuple[str, ...] = ARGUMENT_KEYS) -> CallResult:
    """A call from the members of its JSON object: `(key, value, raw value text)` in order. The
    name is the first member under one of `name_keys`, the arguments the one under `argument_keys`.

    A member written twice rejects the call: which one the model meant is unclear, and a stream
    that already sent the first could not take it back."""
    fields = {key: (value, raw) for key, value, raw in members}
    if len(fields) < len(members):
        seen: set[str] = set()
        twice = next(key for key, _, _ in members if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        return Rejection(INVALID_JSON, [f"$: the call object has {twice!r} more than once"])
    name = next((value for key, value, _ in members if key in name_keys), None)
    if not isinstance(name, str) or not name.strip():
        return Rejection(INVALID_JSON, [f'$.{name_keys[0]}: the call object has no "{name_keys[0]}" string'])
    call_id = fields.get("id", (None, ""))[0]
    key = next((k for k in argument_keys if k in fields), None)
    if key is None:
        arguments: tuple[dict[str, Any], str] | str = ({}, "{}")
    else:
        arguments = arguments_of(*fields[key])
    if isinstance(arguments, str):
        return Rejection(INVALID_JSON, [f"$.{key}: {arguments}"], name=name.strip())
    return ParsedCall(name, arguments[0], arguments[1], call_id if isinstance(call_id, str) else None)

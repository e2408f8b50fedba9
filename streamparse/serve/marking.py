"""Which spans of a rendered prompt the request brought: every free-text string is marked, the marks
are followed through rendering, and the prompt is cut into `PromptPart`s.

Scheme: each request string's non-whitespace core is wrapped in two private-use characters (a pair
that occurs nowhere in the request or the template, chosen per request, so request text cannot fake
a boundary). The template is rendered plain and marked; the marked render with the marks removed
must equal the plain one byte for byte, else the marks changed what the template decided (it tested
the text: `startswith`, `== ''`, `|length`...). Then the fields that change it alone are rendered
unmarked; an unmarked string that holds control-token text is refused (`ControlTokenError`), since
nothing could then keep it from becoming that token. Marks a template cut apart (`split`, slices)
are read conservatively: text touching a mark on its inner side is request text.
Enumerations templates compare (`role`, `type`, `reasoning_effort`, ...) are never marked; one that
holds control-token text is refused the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import TemplateRenderError

__all__ = ["ControlTokenError", "PromptPart", "render_parts"]

# Keys whose values templates compare as enumerations: never marked.
ENUM_KEYS = frozenset({"role", "type", "reasoning_effort", "thinking_mode", "tool_choice"})
# Keys under which a tools' JSON Schema holds names the request chose (their keys are marked too).
_NAMED_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_PRIVATE_USE = (0xF0000, 0xFFFFD)  # plane 15


class ControlTokenError(TemplateRenderError):
    """A request string holding control-token text that the proxy cannot keep as ordinary text."""

    def __init__(self, field: str, token: str, why: str) -> None:
        super().__init__(f"{field} holds the control token {token!r}, and {why}; remove it from the request")
        self.field = field


@dataclass(frozen=True)
class PromptPart:
    """A span of a rendered prompt; `from_request`: its text came from the request, not the template."""

    text: str
    from_request: bool


Path = str
Marker = Callable[[str, str], str]  # (path, text) -> the text as the template gets it


def _child_keys(free_keys: bool | None, key: Any) -> bool | None:
    """Whether a child's keys are the request's names: `None` at every depth (argument objects), else
    only the direct keys of a schema's `properties`-like map."""
    return None if free_keys is None else key in _NAMED_MAPS


def _walk_strings(value: Any, path: Path, out: list[tuple[Path, str, bool]], free_keys: bool | None,
                  under_enum: bool = False) -> None:
    """Every string `_rebuild` can mark: (path, text, is an enumeration, so never marked)."""
    if isinstance(value, str):
        out.append((path, value, under_enum))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if free_keys is not False and isinstance(key, str):
                out.append((f"{path}.<key {key!r}>", key, False))
            _walk_strings(item, f"{path}.{key}", out, _child_keys(free_keys, key),
                          under_enum or (free_keys is False and key in ENUM_KEYS))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _walk_strings(item, f"{path}[{i}]", out, None if free_keys is None else False, under_enum)


def _rebuild(value: Any, path: Path, mark: Marker, free_keys: bool | None, under_enum: bool) -> Any:
    if isinstance(value, str):
        return value if under_enum else mark(path, value)
    if isinstance(value, Mapping):
        rebuilt = {}
        for key, item in value.items():
            new_key = mark(f"{path}.<key {key!r}>", key) if free_keys is not False and isinstance(key, str) else key
            rebuilt[new_key] = _rebuild(item, f"{path}.{key}", mark, _child_keys(free_keys, key),
                                        under_enum or (free_keys is False and key in ENUM_KEYS))
        return rebuilt
    if isinstance(value, (list, tuple)):
        return [_rebuild(item, f"{path}[{i}]", mark, None if free_keys is None else False, under_enum)
                for i, item in enumerate(value)]
    return value


def _arguments_as_objects(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages with JSON-text tool-call arguments parsed (as rendering prepares them), so their keys and
    values can be marked one by one."""
    out = []
    for message in messages:
        item = dict(message)
        calls = item.get("tool_calls")
        if isinstance(calls, list):
            new_calls = []
            for call in calls:
                function = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping) and isinstance(function.get("arguments"), str):
                    try:
                        parsed = json.loads(function["arguments"])
                    except ValueError:
                        parsed = None
                    if isinstance(parsed, dict):
                        new_calls.append({**call, "function": {**function, "arguments": parsed}})
                        continue
                new_calls.append(call)
            item["tool_calls"] = new_calls
        out.append(item)
    return out


def _inputs(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
            kwargs: Mapping[str, Any], arguments_as_objects: bool) -> dict[str, Any]:
    return {"messages": _arguments_as_objects(messages) if arguments_as_objects else list(messages),
            "tools": list(tools) if tools else None,
            "chat_template_kwargs": dict(kwargs)}


def _free_keys(path: Path) -> bool:
    return path.endswith(".arguments")


def _prepared(inputs: Mapping[str, Any], mark: Marker) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in inputs.items():
        if value is None:
            out[name] = None
        elif name == "messages":
            out[name] = [_rebuild_message(m, f"messages[{i}]", mark) for i, m in enumerate(value)]
        else:
            out[name] = _rebuild(value, name, mark, False, False)
    return out


def _rebuild_message(message: Mapping[str, Any], path: Path, mark: Marker) -> dict[str, Any]:
    rebuilt: dict[str, Any] = _rebuild(message, path, mark, False, False)
    for i, call in enumerate(rebuilt.get("tool_calls") or []):  # the arguments' keys are the model's to choose
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), dict):
            original = message["tool_calls"][i]["function"]["arguments"]
            function["arguments"] = _rebuild(original, f"{path}.tool_calls[{i}].function.arguments", mark, None,
                                             False)
    return rebuilt


def _all_strings(inputs: Mapping[str, Any]) -> list[tuple[Path, str, bool]]:
    out: list[tuple[Path, str, bool]] = []
    for name, value in inputs.items():
        if name == "messages":
            for i, message in enumerate(value):
                for key, item in message.items():
                    if key != "tool_calls":
                        _walk_strings(item, f"messages[{i}].{key}", out, False, key in ENUM_KEYS)
                for j, call in enumerate(message.get("tool_calls") or []):
                    path = f"messages[{i}].tool_calls[{j}]"
                    function = call.get("function") if isinstance(call, Mapping) else None
                    if isinstance(function, Mapping) and isinstance(function.get("arguments"), dict):
                        _walk_strings({k: v for k, v in call.items() if k != "function"}, path, out, False)
                        _walk_strings({k: v for k, v in function.items() if k != "arguments"}, f"{path}.function",
                                      out, False)
                        _walk_strings(function["arguments"], f"{path}.function.arguments", out, None)
                    else:
                        _walk_strings(call, path, out, False)
        elif value is not None:
            _walk_strings(value, name, out, False)
    return out


def _marker_pair(texts: Sequence[str]) -> tuple[str, str]:
    used = set().union(*map(set, texts)) if texts else set()
    for code in range(_PRIVATE_USE[0], _PRIVATE_USE[1], 2):
        if chr(code) not in used and chr(code + 1) not in used:
            return chr(code), chr(code + 1)
    raise TemplateRenderError("the request uses every private-use character of plane 15; it cannot be marked")


def _first_token(text: str, tokens: Collection[str]) -> str | None:
    found = [t for t in tokens if t and t in text]
    return max(found, key=len) if found else None


def _split(marked: str, start: str, end: str) -> list[PromptPart]:
    """The marked render cut at the marks: a chunk is template text only when no mark touches it on its
    inner side (the previous mark is an end or none, the next a start or none)."""
    chunks: list[tuple[str, str | None, str | None]] = []  # (text, previous mark, next mark)
    previous: str | None = None
    begin = 0
    for i, char in enumerate(marked):
        if char in (start, end):
            chunks.append((marked[begin:i], previous, char))
            previous, begin = char, i + 1
    chunks.append((marked[begin:], previous, None))
    parts: list[PromptPart] = []
    for text, before, after in chunks:
        if not text:
            continue
        from_request = before == start or after == end
        if parts and parts[-1].from_request == from_request:
            parts[-1] = PromptPart(parts[-1].text + text, from_request)
        else:
            parts.append(PromptPart(text, from_request))
    return parts


# Renders `_diverging` may spend finding the texts a template branches on. Each render costs the whole
# prompt, so the search costs at most this many prompts whatever the request holds; what it has not
# cleared by then is treated as diverging (left unmarked, and refused if it holds control-token text).
MAX_SEARCH_RENDERS = 48


def _diverging(texts: Sequence[str], faithful: Callable[[frozenset[str]], bool],
               budget: int = MAX_SEARCH_RENDERS) -> set[str]:
    """The texts whose marks change what the template decides, when marking all of `texts` does:
    group testing by halves, so k such texts among n cost at most 2k·log2(n) renders, not n (one per
    text). `faithful(group)`: the render with exactly `group` marked equals the plain one. The second
    half of a failing group whose first half passed is taken to fail without a render. Groups left
    when `budget` renders are spent count as diverging, and so does a singleton taken to fail: a text
    is only ever marked where a render showed its marks change nothing."""
    found: set[str] = set()
    # (group, what is known of it: "fails", "first" half or "second" half of a failing group)
    pending: list[tuple[list[str], str]] = [(list(texts), "fails")]
    spent = 0
    while pending:
        group, known = pending.pop()
        if known != "fails":
            if spent >= budget:
                found.update(group)
                continue
            spent += 1
            if faithful(frozenset(group)):
                if known == "first":  # its sibling, next on the stack, holds what made the parent fail
                    pending[-1] = (pending[-1][0], "fails")
                continue
        if len(group) == 1:
            found.add(group[0])
        else:
            half = len(group) // 2
            pending += [(group[half:], "second"), (group[:half], "first")]
    return found


def render_parts(render: Callable[..., str], messages: Sequence[Mapping[str, Any]],
                 tools: Sequence[Mapping[str, Any]] | None, add_generation_prompt: bool,
                 kwargs: Mapping[str, Any], control_tokens: Collection[str], template_text: str = "",
                 arguments_as_objects: bool = True) -> list[PromptPart]:
    """The prompt `render(messages, tools, add_generation_prompt, **kwargs)` gives, cut into parts.
    `control_tokens`: the texts of the vocabulary's special and added tokens. Raises `ControlTokenError`
    when a request string holding one of them cannot be kept apart (see the module docstring).
    `arguments_as_objects`: the template iterates tool-call arguments (JSON text is parsed, its keys and
    values marked one by one); False for a template that prints them as the text sent (marked whole)."""
    inputs = _inputs(messages, tools, kwargs, arguments_as_objects)
    strings = _all_strings(inputs)
    for path, text, enum in strings:
        if enum and (token := _first_token(text, control_tokens)) is not None:
            raise ControlTokenError(path, token, "the template compares this field as a fixed value")
    start, end = _marker_pair([text for _, text, _ in strings] + [template_text])

    def go(marked_texts: Callable[[str], bool]) -> str:
        def mark(path: Path, text: str) -> str:
            core = text.strip()
            if not core or not marked_texts(text):
                return text
            lead = text[:len(text) - len(text.lstrip())]
            return f"{lead}{start}{core}{end}{text[len(lead) + len(core):]}"
        prepared = _prepared(inputs, mark)
        return render(prepared["messages"], prepared["tools"], add_generation_prompt,
                      **prepared["chat_template_kwargs"])

    plain = go(lambda text: False)

    def marked_render(marked_texts: Callable[[str], bool]) -> str | None:
        """The render with these texts marked, or None when the marks make the template raise (a
        template that checks a text's form: Mistral's 9-character call ids)."""
        try:
            return go(marked_texts)
        except TemplateRenderError:
            return None

    def faithful(marked: str | None) -> bool:
        return marked is not None and marked.replace(start, "").replace(end, "") == plain

    marked: str | None = marked_render(lambda text: True)
    if not faithful(marked):
        # A text is marked everywhere or nowhere: a template may compare two request strings
        # (a call's id with a result's tool_call_id, a property name with `required`).
        markable = list(dict.fromkeys(text for _, text, enum in strings if text.strip() and not enum))
        diverging = _diverging(markable, lambda group: faithful(marked_render(group.__contains__)))
        marked = marked_render(lambda text: text not in diverging)
        if not faithful(marked):
            diverging, marked = set(markable), plain
        for path, text, _ in strings:
            if text in diverging and (token := _first_token(text, control_tokens)) is not None:
                raise ControlTokenError(path, token, "the chat template branches on this text")
    assert marked is not None  # faithful, or the plain render
    return _split(marked, start, end)

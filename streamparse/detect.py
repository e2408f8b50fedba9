"""Which format a model writes, from its chat template; whether its prompt leaves reasoning open."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from .registry import get_format

Rule = tuple[str, tuple[str, ...]]  # (format, strings that must all occur in the template)


def _ordered(rules: Sequence[Rule]) -> tuple[Rule, ...]:
    """More strings first, then longer ones: the more specific rule wins."""
    return tuple(sorted(rules, key=lambda rule: (-len(rule[1]), -sum(map(len, rule[1])), rule[0])))


@cache
def _rules() -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """Every format's declared markers (`FormatSpec.detect`, `detect_turns`), in the order they are tried."""
    from .families import FAMILIES

    markup = [(spec.name, markers) for spec in FAMILIES for markers in spec.detect]
    turns = [(spec.name, (marker,)) for spec in FAMILIES for marker in spec.detect_turns]
    return _ordered(markup), _ordered(turns)


def _templates(source: str | os.PathLike[str] | Mapping[str, Any]) -> list[str]:
    """The template texts in a template string, a tokenizer_config.json dict, or a path to either."""
    if isinstance(source, Mapping):
        value = source.get("chat_template")
        if value is None:
            raise ValueError("this tokenizer config has no 'chat_template'; pass the template text instead")
        if isinstance(value, str):
            return [value]
        if isinstance(value, list):
            named = [t for t in value if isinstance(t, Mapping) and isinstance(t.get("template"), str)]
            # The tool-use template shows the call markup; try it first.
            named.sort(key=lambda t: t.get("name") != "tool_use")
            return [t["template"] for t in named]
        raise ValueError("'chat_template' must be a string or a list of {'name', 'template'} entries")
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            return _templates(json.loads(text))
        return [text]
    if isinstance(source, str):
        return [source]
    raise TypeError("detect_format takes a chat template (str), a tokenizer_config dict, or a path to either")


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and "{" not in text and len(text) < 4096 and Path(text).is_file()


def detect_format(chat_template: str | os.PathLike[str] | Mapping[str, Any]) -> str | None:
    """The streamparse format a model's chat template writes, or None when it shows none we read.

    Accepts the template text, a `tokenizer_config.json` dict, or a path to a template or to
    `tokenizer_config.json`."""
    templates = [t for t in _templates(chat_template) if _is_jinja(t)]
    for rules in _rules():
        for name, markers in rules:
            for template in templates:
                if all(marker in template for marker in markers):
                    return name
    return None


def _is_jinja(text: str) -> bool:
    """A chat template is Jinja code: prose that only mentions a marker (a README) names no format."""
    return "{%" in text or "{{" in text


def thinking_forced_open(prompt: str, format: str = "hermes") -> bool:
    """Whether a rendered prompt ends inside an open reasoning block (its last opener is unclosed).

    Qwen3/QwQ/R1 thinking prompts end in `<think>\\n`; the model's output then starts with reasoning
    and has no opening tag."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be the rendered prompt text (str), got {type(prompt).__name__}")
    return get_format(format).ends_inside_reasoning(prompt)

"""Which format a model writes, from its chat template; whether its prompt leaves reasoning open."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from .gguf_metadata import chat_templates, is_gguf
from .registry import get_format
from .spec import SUFFIX

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
        if path.is_dir():  # a model directory: its template files
            return _suffix_templates(path)
        if path.suffix == ".gguf" or is_gguf(path):  # a llama.cpp model file: its templates, tool-use first
            found = chat_templates(path)
            return [found] if isinstance(found, str) else [text for _, text in
                                                          sorted(found, key=lambda item: item[0] != "tool_use")]
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            return _templates(json.loads(text))
        return [text]
    if isinstance(source, str):
        return [source]
    raise TypeError("detect_format takes a chat template (str), a tokenizer_config dict, or a path to either")


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and "{" not in text and len(text) < 4096 and (Path(text).is_file() or Path(text).is_dir())


def detect_format(chat_template: str | os.PathLike[str] | Mapping[str, Any]) -> str | None:
    """The streamparse format a model's chat template writes, or None when it shows none we read.

    Accepts the template text, a `tokenizer_config.json` dict, or a path to a template, to
    `tokenizer_config.json`, to a model directory or to a GGUF model file. A vocabulary that spells a
    format's markers with several suffixes (`FormatSpec.marker_suffix`) names no format."""
    templates = [t for t in _templates(chat_template) if _is_jinja(t)]
    for rules in _rules():
        for name, markers in rules:
            for template in templates:
                if all(marker in template for marker in markers):
                    # A vocabulary that spells the markers with several suffixes names no one checkpoint.
                    return None if len(_vocabulary_suffixes(chat_template, name)) > 1 else name
    return None


def detect_marker_suffix(source: str | os.PathLike[str] | Mapping[str, Any], format: str) -> str | None:
    """The marker suffix (`:6124c78e`, or "" for plain markers) a checkpoint spells `format`'s markers
    with, or None when nothing names one (or the format's markers carry none).

    From, in order (FORMATS.md, fourth wave, Decision 7): the tokenizer's added tokens (`source` a
    `tokenizer_config.json` or `tokenizer.json` dict, a path to either, or a model directory holding
    them), the one exactly `<tool_calls` + SUF + `>` (several different: None, ambiguous); then the
    chat template, a literal `<tool_calls:SUF>` or a `{% set HYTK = 'SUF' %}` switch."""
    marker = get_format(format).marker_suffix
    if marker is None:
        return None
    found = _vocabulary_suffixes(source, format)
    if found:
        return found.pop() if len(found) == 1 else None
    literal = re.compile(re.escape(marker.carrier) + rf"(?P<suffix>{SUFFIX})>")
    for template in _suffix_templates(source):
        if not _is_jinja(template):
            continue
        spelled = {match.group("suffix") for match in literal.finditer(template) if match.group("suffix")}
        if len(spelled) == 1:
            return spelled.pop()
        switch = re.search(marker.template_switch, template) if marker.template_switch else None
        if switch is not None:
            return ":" + switch.group("suffix")
    return None


def _vocabulary_suffixes(source: str | os.PathLike[str] | Mapping[str, Any], format: str) -> set[str]:
    """The suffixes of the added tokens `<tool_calls…>` (the format's `MarkerSuffix.carrier`) in the
    tokenizer files `source` is or holds; none for a format whose markers carry no suffix."""
    marker = get_format(format).marker_suffix
    if marker is None:
        return set()
    carrier = re.compile(re.escape(marker.carrier) + rf"(?P<suffix>{SUFFIX})>")
    found: set[str] = set()
    for data in _tokenizer_files(source):
        tokens: list[Any] = []
        decoder = data.get("added_tokens_decoder")
        if isinstance(decoder, Mapping):
            tokens += [entry.get("content") for entry in decoder.values() if isinstance(entry, Mapping)]
        added = data.get("added_tokens")
        if isinstance(added, list):
            tokens += [entry.get("content") for entry in added if isinstance(entry, Mapping)]
        specific = data.get("model_specific_special_tokens")
        if isinstance(specific, Mapping):
            tokens += list(specific.values())
        found |= {match.group("suffix") for token in tokens if isinstance(token, str)
                  and (match := carrier.fullmatch(token)) is not None}
    return found


def _path_of(source: str | os.PathLike[str] | Mapping[str, Any]) -> Path | None:
    """The file or directory `source` names, or None for a template text or a dict."""
    if isinstance(source, Mapping):
        return None
    if isinstance(source, os.PathLike):
        return Path(source)
    if "\n" in source or "{" in source or len(source) >= 4096:
        return None
    path = Path(source)
    return path if path.is_file() or path.is_dir() else None


def _tokenizer_files(source: str | os.PathLike[str] | Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The tokenizer JSON objects `source` is, names or (a model directory) holds."""
    if isinstance(source, Mapping):
        return [source]
    path = _path_of(source)
    if path is None:
        return []
    paths = [path / "tokenizer_config.json", path / "tokenizer.json"] if path.is_dir() else [path]
    out = []
    for candidate in paths:
        if candidate.suffix == ".json" and candidate.is_file():
            data = json.loads(candidate.read_text(encoding="utf-8"))
            if isinstance(data, Mapping):
                out.append(data)
    return out


def _suffix_templates(source: str | os.PathLike[str] | Mapping[str, Any]) -> list[str]:
    """The chat templates `source` is or holds (a model directory: its template files); none in a
    tokenizer file without one."""
    path = _path_of(source)
    if path is not None and path.is_dir():
        texts = [path.joinpath("chat_template.jinja").read_text(encoding="utf-8")] \
            if path.joinpath("chat_template.jinja").is_file() else []
        files = [*_tokenizer_files(path / "chat_template.json"), *_tokenizer_files(path)]
        return texts + [text for data in files if data.get("chat_template") is not None for text in _templates(data)]
    data = [source] if isinstance(source, Mapping) else _tokenizer_files(path) if path is not None else []
    if data:
        return [text for found in data if found.get("chat_template") is not None for text in _templates(found)]
    return _templates(source)


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

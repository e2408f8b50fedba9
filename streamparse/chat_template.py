"""A model's chat template, rendered as Hugging Face `apply_chat_template` renders it.

Loads a `.jinja` file, a `tokenizer_config.json` (or `chat_template.json`), or a model directory
holding either; special tokens (`bos_token`, `eos_token`, ...) come from `tokenizer_config.json`
when there is one. Rendering uses a sandboxed jinja2 environment with HF's conventions:
`trim_blocks`, `lstrip_blocks`, the loopcontrols extension, a `tojson` that neither HTML-escapes
nor reorders keys, `raise_exception` and `strftime_now`. Needs the `server` extra (jinja2).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

if TYPE_CHECKING:
    from .prompt_marking import PromptPart
    from .prompt_tokens import PromptTokenizer

__all__ = ["ChatTemplate", "TemplateRenderError", "load_chat_template"]

# The tokenizer attributes HF passes to every template render.
_SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


class TemplateRenderError(ValueError):
    """The template refused the request (its `raise_exception`) or failed on it: the client's input is at fault."""


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    # HF's tojson: plain json.dumps; jinja's own would HTML-escape and sort keys.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json stores it: a string or an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _for_template(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages as templates expect them (as vLLM prepares them): text parts joined into one string,
    tool-call arguments given as JSON text parsed into objects."""
    prepared = []
    for message in messages:
        item = copy.deepcopy(dict(message))
        content = item.get("content")
        if isinstance(content, list):
            item["content"] = "".join(
                part.get("text", "") for part in content if isinstance(part, Mapping) and part.get("type") == "text")
        for call in item.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                with contextlib.suppress(ValueError):  # not JSON: left as text for the template
                    function["arguments"] = json.loads(function["arguments"])
        prepared.append(item)
    return prepared


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template and the special tokens it is rendered with.

    `source` is one template, or HF's list of named ones (`{"name", "template"}`): then the
    `tool_use` template is used when tools are given and it exists, else `default`."""

    source: str | tuple[tuple[str, str], ...]
    special_tokens: Mapping[str, str] = field(default_factory=dict)
    origin: str = "<string>"
    tokenizer_file: str | None = None   # the tokenizer.json beside the template, when there is one

    def __post_init__(self) -> None:
        # ChatTemplate(path): a .jinja file, a tokenizer_config.json or a model directory, as load_chat_template
        source: Any = self.source
        if isinstance(source, os.PathLike) or (isinstance(source, str) and "{" not in source
                                                and "\n" not in source and Path(source).exists()):
            loaded = load_chat_template(source)
            for name in ("source", "special_tokens", "origin", "tokenizer_file"):
                object.__setattr__(self, name, getattr(loaded, name))

    @cached_property
    def tokenizer(self) -> PromptTokenizer | None:
        """The model's tokenizer (from `tokenizer_file`), or None when there is none."""
        if self.tokenizer_file is None:
            return None
        from .prompt_tokens import PromptTokenizer

        return PromptTokenizer(self.tokenizer_file)

    def render_parts(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
                     add_generation_prompt: bool = True, **kwargs: Any) -> list[PromptPart]:
        """`render`'s prompt cut into the spans the template wrote and those the request brought
        (`streamparse.prompt_marking`). Raises `ControlTokenError` (a `TemplateRenderError`) when a
        request string holding control-token text cannot be kept apart from the template's own."""
        from .prompt_marking import render_parts

        tokenizer = self.tokenizer
        control = tokenizer.control_tokens if tokenizer is not None else frozenset(self.special_tokens.values())
        return render_parts(self.render, messages, tools, add_generation_prompt, kwargs, control, self.text)

    def encode(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
               add_generation_prompt: bool = True, **kwargs: Any) -> list[int]:
        """The prompt as the model's token ids: control tokens only where the template wrote them."""
        tokenizer = self.tokenizer
        if tokenizer is None:
            raise ValueError(f"chat template {self.origin} has no tokenizer.json beside it: encode needs the "
                             "model directory's tokenizer.json")
        return tokenizer.encode_parts(self.render_parts(messages, tools, add_generation_prompt, **kwargs))

    @cached_property
    def _compiled(self) -> dict[str, jinja2.Template]:
        env = _environment()
        named = self.source if isinstance(self.source, tuple) else (("default", self.source),)
        try:
            return {name: env.from_string(text) for name, text in named}
        except jinja2.TemplateSyntaxError as error:
            raise ValueError(f"chat template {self.origin} does not compile: {error}") from None

    @property
    def text(self) -> str:
        """The template text `detect_format` reads (every named template, tool-use first)."""
        if isinstance(self.source, str):
            return self.source
        ordered = sorted(self.source, key=lambda item: item[0] != "tool_use")
        return "\n".join(text for _, text in ordered)

    def render(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
               add_generation_prompt: bool = True, **kwargs: Any) -> str:
        """The prompt text, as `tokenizer.apply_chat_template(..., tokenize=False)` gives it.
        `kwargs` are extra template variables (`enable_thinking`, `reasoning_effort`, ...).
        Raises `TemplateRenderError` when the template rejects or cannot render the messages."""
        templates = self._compiled
        name = "tool_use" if tools and "tool_use" in templates else "default"
        template = templates.get(name) or next(iter(templates.values()))
        variables: dict[str, Any] = {**self.special_tokens, **kwargs}
        variables.update(messages=_for_template(messages), tools=copy.deepcopy(list(tools)) if tools else None,
                         add_generation_prompt=add_generation_prompt)
        try:
            return template.render(**variables)
        except jinja2.TemplateError as error:
            raise TemplateRenderError(str(error)) from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as error:
            raise TemplateRenderError(f"the chat template failed on these messages: {error}") from None


def _from_config(config: Mapping[str, Any], origin: str) -> str | tuple[tuple[str, str], ...] | None:
    value = config.get("chat_template")
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        named = tuple((str(t["name"]), str(t["template"])) for t in value
                      if isinstance(t, Mapping) and isinstance(t.get("template"), str))
        if named:
            return named
    raise ValueError(f"'chat_template' in {origin} must be a string or a list of {{'name', 'template'}} entries")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{path} is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object")
    return data


def load_chat_template(path: str | os.PathLike[str]) -> ChatTemplate:
    """The chat template at `path`: a `.jinja` file, a `tokenizer_config.json` / `chat_template.json`,
    or a model directory holding one (`chat_template.jinja` first, as transformers does); with the
    `tokenizer.json` beside it when there is one.
    Raises `OSError` when nothing can be read, `ValueError` when what is there holds no template."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    config_file = folder / "tokenizer_config.json"
    config = _read_json(config_file) if config_file.is_file() else {}
    tokens = {key: text for key in _SPECIAL_TOKEN_KEYS if (text := _token_text(config.get(key))) is not None}
    source: str | tuple[tuple[str, str], ...] | None
    if path.is_dir():
        for candidate in ("chat_template.jinja", "chat_template.json", "tokenizer_config.json"):
            if (path / candidate).is_file():
                return load_chat_template(path / candidate)
        raise OSError(f"no chat_template.jinja, chat_template.json or tokenizer_config.json in {path}")
    if path.suffix == ".json":
        source = _from_config(_read_json(path), str(path))
        if source is None:
            raise ValueError(f"{path} has no 'chat_template'")
    else:
        source = path.read_text(encoding="utf-8")
    tokenizer_file = folder / "tokenizer.json"
    return ChatTemplate(source, tokens, str(path), str(tokenizer_file) if tokenizer_file.is_file() else None)

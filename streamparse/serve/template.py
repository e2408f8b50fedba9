"""A model's chat template, rendered as Hugging Face `apply_chat_template` renders it.

Loads a `.jinja` file, a `tokenizer_config.json` (or `chat_template.json`), or a model directory
holding either; special tokens (`bos_token`, `eos_token`, ...) come from `tokenizer_config.json` and
`special_tokens_map.json` beside it (a bare `.jinja` with neither renders them empty unless the
caller gives them: `streamparse serve/render --special-token bos_token=<s>`). Rendering uses
transformers' sandboxed jinja2 environment: `trim_blocks`, `lstrip_blocks`, the loopcontrols and
`{% generation %}` extensions, a `tojson` that neither HTML-escapes nor reorders keys,
`raise_exception`, `strftime_now`, `dict` and `namespace`. `ChatTemplate.capabilities` says what the
template renders; docs/server.md says what is done with a request it cannot. Needs the `server` extra.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import jinja2.ext
import jinja2.meta
import jinja2.nodes
import jinja2.parser
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..detect import detect_format
from ..gguf_metadata import chat_templates, is_gguf, special_tokens, tokenizer_problem
from ..spec import FormatLike
from ..template_import import format_from_response_template
from .deadline import DeadlineExceeded, within
from .errors import CapabilityError, TemplateRenderError
from .limits import DEFAULT_MAX_PROMPT_CHARS, DEFAULT_RENDER_TIMEOUT

if TYPE_CHECKING:
    from .marking import PromptPart
    from .tokens import PromptTokenizer

__all__ = ["DEFAULT_MAX_PROMPT_CHARS", "DEFAULT_RENDER_TIMEOUT", "Capabilities", "CapabilityError", "ChatTemplate",
           "DeadlineExceeded", "TemplateRenderError", "load_chat_template"]

# The tokenizer attributes HF passes to every template render.
_SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")



def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    # HF's tojson: plain json.dumps; jinja's own would HTML-escape and sort keys.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: transformers marks the assistant's tokens with it
    (for training masks); rendering a prompt prints the body unchanged."""

    tags = {"generation"}  # noqa: RUF012 (jinja reads it from the class)

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Callable[[], str]) -> str:
        return caller()


class _Namespace(jinja2.utils.Namespace):
    """transformers' namespace: no underscore-prefixed attributes (they reach CPython internals)."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # jinja's own signature trick: `self` may be a key
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check(name)
        if isinstance(value, (str, list, tuple)) and len(value) > DEFAULT_MAX_PROMPT_CHARS:  # a doubling loop
            raise jinja2.exceptions.SecurityError(f"the chat template stores a value larger than "
                                                  f"{DEFAULT_MAX_PROMPT_CHARS} characters on a namespace")
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"a chat template cannot store {name!r} on a namespace")


class _Dict:
    """transformers' `dict` global: calling it and `dict.fromkeys`, nothing else of the type."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


# The environment transformers' `render_jinja_template` compiles with: the same options, extensions,
# filters and globals, so every template it accepts compiles here.
_GLOBALS: dict[str, Any] = {"raise_exception": _raise_exception, "dict": _Dict(), "namespace": _Namespace}


class _Sandbox(ImmutableSandboxedEnvironment):
    """transformers' sandbox, with the sizes a template can make bounded by `max_chars` before they are
    made: a string or list repeated (`'x' * 10**10`), a power (`10 ** 10**9`), a call given a huge
    count (`'x'.ljust(10**10)`, `tojson(indent=10**9)`) or a huge string (a macro doubling its
    argument). Each is a `SecurityError` naming the bound. The time a template takes is bounded apart
    (`deadline.within`), and so is the prompt it writes (`ChatTemplate._render_prepared`)."""

    intercepted_binops = frozenset({"*", "**", "+"})

    def __init__(self, max_chars: int) -> None:
        super().__init__(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols])
        self.max_chars = max_chars

    def _too_large(self, what: str) -> jinja2.exceptions.SecurityError:
        return jinja2.exceptions.SecurityError(f"the chat template makes {what} larger than {self.max_chars} "
                                               "characters, the bound on a prompt")

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for sequence, count in ((left, right), (right, left)):
                if isinstance(sequence, (str, list, tuple)) and isinstance(count, int) \
                        and len(sequence) * count > self.max_chars:
                    raise self._too_large("a repeated string or list")
        elif operator == "**":
            if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 \
                    and right * max(1, abs(left).bit_length()) > 8 * self.max_chars:
                raise self._too_large("a number")
        elif isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)) \
                and len(left) + len(right) > self.max_chars:
            raise self._too_large("a joined string or list")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        for value in (*args, *kwargs.values()):
            if (isinstance(value, int) and not isinstance(value, bool) and abs(value) > __self.max_chars) \
                    or (isinstance(value, (str, list, tuple)) and len(value) > __self.max_chars):
                raise __self._too_large("a value passed to a call")
        return super().call(__context, __obj, *args, **kwargs)


def _environment(max_chars: int = DEFAULT_MAX_PROMPT_CHARS) -> ImmutableSandboxedEnvironment:
    env = _Sandbox(max_chars)
    env.filters["tojson"] = _tojson
    env.globals.update(_GLOBALS, strftime_now=_strftime_now)
    return env


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json stores it: a string or an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


# The names a message's reasoning comes under; transformers fills `reasoning_content` (what most
# templates read) and `thinking` (gpt-oss) from whichever is given first, in this order.
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def _text_of(content: list[Any]) -> str:
    return "".join(str(part.get("text", "")) for part in content
                   if isinstance(part, Mapping) and part.get("type") in ("text", "input_text", "output_text"))


def _prepare_message(message: Mapping[str, Any], null_content: str, arguments: str) -> dict[str, Any]:
    """One OpenAI message as the template is given it. Each step is one a valid request needs:
    - keys whose value is null are dropped, as `apply_chat_template` drops them (a template tests
      `'content' in message` or `message.content is defined`, and would print `None`); an assistant
      tool-call turn's `content: null` becomes `""` instead for a template that cannot render it missing
      (`null_content="empty"`, found by `Capabilities`);
    - a content part list becomes its text parts joined, as transformers' server gives text models;
    - tool-call `arguments`, JSON text in the API, become the object templates iterate (`|items`) or
      print with `tojson`, as transformers' server and vLLM do (text that is not JSON stays text); a
      template that concatenates them as text (DeepSeek R1/V3, functionary: `arguments="text"`) gets the
      text as sent;
    - the reasoning aliases transformers applies: `reasoning_content` and `thinking` from whichever of
      `reasoning_content`, `thinking`, `reasoning` is given."""
    item = {key: copy.deepcopy(value) for key, value in message.items() if value is not None}
    if "content" not in item and null_content == "empty":
        item["content"] = ""
    if isinstance(item.get("content"), list):
        item["content"] = _text_of(item["content"])
    calls = item.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if arguments == "object" and isinstance(function, dict) and isinstance(function.get("arguments"), str):
            with contextlib.suppress(ValueError):
                function["arguments"] = json.loads(function["arguments"])
    reasoning = next((item[key] for key in _REASONING_FIELDS if item.get(key) is not None), None)
    if reasoning is not None:
        item = {"thinking": reasoning, **item, "reasoning_content": reasoning}
    return item


# Variables every render has (so not kwargs a template reads from the request).
_GIVEN = frozenset({"messages", "tools", "documents", "add_generation_prompt", "strftime_now", *_GLOBALS,
                    *_SPECIAL_TOKEN_KEYS})


@dataclass(frozen=True)
class Capabilities:
    """What a template renders, found by rendering probe conversations (as llama.cpp's `caps` are).

    Each flag says the probe's marker text reached the prompt: `system_role` (a leading system
    message), `later_system` (a system message after the first turn), `tools` (the tool list),
    `tool_calls`, `parallel_tool_calls` (both of two calls), `tool_call_ids`, `tool_results`,
    `reasoning` (an earlier assistant turn's reasoning, in the turn of a tool call or before a later
    user message), `typed_content` (content given as a part list, as the template receives it raw).
    `null_content` is how an assistant turn's `content: null` is given: `"absent"` (the key dropped, as
    transformers does) or `"empty"` (`""`, for a template that fails without it). `arguments` is how
    tool-call arguments are given: `"object"` (parsed from the JSON text) or `"text"` (as sent, for a
    template that fails on an object). `kwargs` are the
    variables the template reads that a request may set (`enable_thinking`, `reasoning_effort`, ...)."""

    system_role: bool
    later_system: bool
    tools: bool
    tool_calls: bool
    parallel_tool_calls: bool
    tool_call_ids: bool
    tool_results: bool
    reasoning: bool
    typed_content: bool
    null_content: str
    arguments: str
    kwargs: frozenset[str]

    def summary(self) -> str:
        """One line naming what the template renders and what it does not."""
        flags = [name for name in _FLAGS if getattr(self, name)]
        missing = [name for name in _FLAGS if not getattr(self, name)]
        return (f"renders: {', '.join(flags) or 'nothing probed'}; not: {', '.join(missing) or '-'}; "
                f"content null as {self.null_content}; arguments as {self.arguments}; "
                f"kwargs: {', '.join(sorted(self.kwargs)) or '-'}")


_FLAGS = ("system_role", "later_system", "tools", "tool_calls", "parallel_tool_calls", "tool_call_ids",
          "tool_results", "reasoning", "typed_content")

# The tool list, in a system message, for a template that never prints tools: llama.cpp's polyfill
# (minja `polyfill_tools`: this sentence and the list as indented JSON, added to the system message).
_TOOLS_PREAMBLE = "You can call any of the following tools to satisfy the user's requests: "


def _probe_tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": f"{name} probe",
                                             "parameters": {"type": "object",
                                                            "properties": {"q": {"type": "string",
                                                                                  "description": "q probe"}}}}}


def _probe_call(name: str, call_id: str, value: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps({"q": value})}}


def _agent_probe(calls: list[dict[str, Any]], reasoning: str | None = None) -> list[dict[str, Any]]:
    turn: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
    if reasoning is not None:
        turn["reasoning_content"] = reasoning
    results = [{"role": "tool", "tool_call_id": call["id"], "content": f"result{index}zq"}
               for index, call in enumerate(calls)]
    return [{"role": "user", "content": "askzq"}, turn, *results]


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template and the special tokens it is rendered with.

    `source` is one template, or HF's list of named ones (`{"name", "template"}`): then the
    `tool_use` template is used when tools are given and it exists, else `default`."""

    source: str | tuple[tuple[str, str], ...]
    special_tokens: Mapping[str, str] = field(default_factory=dict)
    origin: str = "<string>"
    tokenizer_file: str | None = None   # the tokenizer.json beside the template (or the GGUF file), when there is one
    # Bounds on one render (the template is untrusted code): seconds (None: none) and characters written;
    # past them `DeadlineExceeded` / `TemplateRenderError`.
    render_timeout: float | None = DEFAULT_RENDER_TIMEOUT
    max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS
    # The checkpoint's transformers `response_template` (tokenizer_config.json), when it ships one.
    response_template: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        # ChatTemplate(path): a .jinja file, a tokenizer_config.json or a model directory, as load_chat_template
        source: Any = self.source
        if isinstance(source, os.PathLike) or (isinstance(source, str) and "{" not in source
                                                and "\n" not in source and Path(source).exists()):
            loaded = load_chat_template(source)
            for name in ("source", "special_tokens", "origin", "tokenizer_file", "response_template"):
                object.__setattr__(self, name, getattr(loaded, name))

    def choose_format(self) -> tuple[FormatLike, str]:
        """The format of this template's outputs and a line saying where it came from: the declared one
        `detect_format` finds in the template, else the one the checkpoint's `response_template`
        describes (`format_from_response_template`). `ValueError` when there is neither."""
        declared = detect_format(self.text)
        if declared is not None:
            return declared, f"the chat template writes the declared format {declared}"
        if self.response_template is None:
            raise ValueError(f"no declared format matches the chat template {self.origin}, and its checkpoint "
                             "ships no response_template; name a format")
        spec = format_from_response_template(self.response_template, name="response_template")
        return spec, (f"no declared format matches the chat template {self.origin}: reading the checkpoint's "
                      "response_template (tokenizer_config.json)")

    @cached_property
    def tokenizer(self) -> PromptTokenizer | None:
        """The model's tokenizer (from `tokenizer_file`), or None when there is none."""
        if self.tokenizer_file is None:
            return None
        from .tokens import PromptTokenizer

        return PromptTokenizer(self.tokenizer_file)

    def render_parts(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
                     add_generation_prompt: bool = True, **kwargs: Any) -> list[PromptPart]:
        """`render`'s prompt cut into the spans the template wrote and those the request brought
        (`streamparse.serve.marking`). Raises `ControlTokenError` (a `TemplateRenderError`) when a
        request string holding control-token text cannot be kept apart from the template's own."""
        from .marking import render_parts

        tokenizer = self.tokenizer
        control = tokenizer.control_tokens if tokenizer is not None else frozenset(self.special_tokens.values())
        return render_parts(self.render, messages, tools, add_generation_prompt, kwargs, control, self.text,
                            arguments_as_objects=self.capabilities.arguments == "object")

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
        env = _environment(self.max_prompt_chars)
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

    def _template(self, tools: object) -> jinja2.Template:
        templates = self._compiled
        return templates.get("tool_use" if tools and "tool_use" in templates else "default") \
            or next(iter(templates.values()))

    def _render_prepared(self, variables: Mapping[str, Any]) -> str:
        """Render prepared template variables (`prepare`'s): every failure is a `TemplateRenderError`."""
        template = self._template(variables.get("tools"))
        try:
            with within(self.render_timeout, "rendering the chat template"):
                pieces: list[str] = []
                written = 0
                for piece in template.generate(**variables):
                    written += len(piece)
                    if written > self.max_prompt_chars:
                        raise TemplateRenderError(f"the chat template writes a prompt of more than "
                                                  f"{self.max_prompt_chars} characters for this request")
                    pieces.append(piece)
                return "".join(pieces)
        except TemplateRenderError:
            raise
        except jinja2.TemplateError as error:
            raise TemplateRenderError(str(error)) from None
        except RecursionError:  # e.g. the Hermes templates' schema macro on a `["string", "null"]` type
            raise TemplateRenderError("the chat template cannot render these tool schemas (it recurses "
                                      "without end on them; transformers fails the same way)") from None
        except OverflowError as error:  # the sandbox's bound on range(): `range(10**9)`
            raise TemplateRenderError(f"the chat template asks for too much: {error}") from None
        except MemoryError:
            raise TemplateRenderError("the chat template ran out of memory on this request") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as error:
            raise TemplateRenderError(f"the chat template failed on these messages: {error}") from None

    def _variables(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
                   add_generation_prompt: bool, kwargs: Mapping[str, Any], null_content: str,
                   arguments: str) -> dict[str, Any]:
        variables: dict[str, Any] = {**self.special_tokens, **copy.deepcopy(dict(kwargs))}
        variables.update(messages=[_prepare_message(m, null_content, arguments) for m in messages],
                         tools=copy.deepcopy(list(tools)) if tools else None,
                         add_generation_prompt=add_generation_prompt)
        return variables

    def _probe(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
               null_content: str = "absent", arguments: str = "object") -> str:
        """The probe rendered without tools, or (for a template that needs them) with them; "" if neither."""
        for offered in (None, tools):
            try:
                return self._render_prepared(self._variables(messages, offered, True, {}, null_content, arguments))
            except TemplateRenderError:
                continue
        return ""

    @cached_property
    def capabilities(self) -> Capabilities:
        """What this template renders (see `Capabilities`), found once by rendering probes (within
        `render_timeout` in all: `DeadlineExceeded` past it, naming the probe)."""
        self._compiled  # noqa: B018 (a template that does not compile fails here, not as "renders nothing")
        with within(self.render_timeout, "probing what the chat template renders"):
            return self._probed()

    def _probed(self) -> Capabilities:
        if self.missing_special_tokens:  # a bare .jinja: probe as if they were given, so the answer is the template's
            placeholders = {name: f"<{name}>" for name in self.missing_special_tokens}
            return replace(self, special_tokens={**self.special_tokens, **placeholders})._probed()
        user = {"role": "user", "content": "askzq"}
        # Call ids of 9 letters and digits: the Mistral templates refuse any other.
        one = [_probe_call("alphazq", "zqcallid1", "argzq1")]
        two = [*one, _probe_call("betazq", "zqcallid2", "argzq2")]
        tools = [_probe_tool("alphazq"), _probe_tool("betazq")]
        null_content, arguments, agent = "absent", "object", ""
        for null_content, arguments in (("absent", "object"), ("empty", "object"), ("absent", "text"),
                                        ("empty", "text")):
            agent = self._probe(_agent_probe(one), tools, null_content, arguments)
            if "alphazq" in agent:
                break
        else:
            null_content, arguments = "absent", "object"
        parallel = self._probe(_agent_probe(two), tools, null_content, arguments)
        reasoning = (self._probe(_agent_probe(one, "reasonzq"), tools, null_content, arguments)
                     + self._probe([user, {"role": "assistant", "content": "answerzq", "reasoning_content": "reasonzq"},
                                    {"role": "user", "content": "againzq"}], tools))
        typed = self._render_raw([{"role": "user", "content": [{"type": "text", "text": "typedzq"}]}])
        later = self._probe([user, {"role": "assistant", "content": "answerzq"},
                             {"role": "system", "content": "laterzq"}, {"role": "user", "content": "againzq"}], tools)
        return Capabilities(
            system_role="systemzq" in self._probe([{"role": "system", "content": "systemzq"}, user], tools),
            later_system="laterzq" in later,
            tools="alphazq" in self._render_tools([user], tools),
            tool_calls="argzq1" in agent or "alphazq" in agent,
            # Kimi prints the call ids, not the names: both calls' arguments count as well
            parallel_tool_calls=all(m in parallel for m in ("alphazq", "betazq"))
            or all(m in parallel for m in ("argzq1", "argzq2")),
            tool_call_ids="zqcallid1" in agent,
            tool_results="result0zq" in agent,
            reasoning="reasonzq" in reasoning,
            typed_content="typedzq" in typed,
            null_content=null_content,
            arguments=arguments,
            kwargs=self._kwargs_read())

    def _render_tools(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        try:
            return self._render_prepared(self._variables(messages, tools, True, {}, "absent", "object"))
        except TemplateRenderError:
            return ""

    def _render_raw(self, messages: list[dict[str, Any]]) -> str:
        try:
            return self._template(None).render(messages=messages, tools=None, add_generation_prompt=True,
                                               **self.special_tokens)
        except Exception:  # a probe: whatever the template did with raw parts, it did not render them
            return ""

    @cached_property
    def renders_developer(self) -> bool:
        """Whether the template names the `developer` role itself (gpt-oss's harmony renders it apart);
        for one that does not, a `developer` message is rendered as `system`, as OpenAI treats it."""
        return "developer" in self.text

    @property
    def reserved_variables(self) -> frozenset[str]:
        """Template variables set by the renderer, never by a request's `chat_template_kwargs`: the
        special tokens (the tokenizer's `bos_token`, ... and any given with the template) and the globals."""
        return frozenset({*_SPECIAL_TOKEN_KEYS, *self.special_tokens, *_GLOBALS, "strftime_now"})

    @cached_property
    def missing_special_tokens(self) -> frozenset[str]:
        """The special tokens (`bos_token`, `eos_token`, ...) the template reads and nothing gave it: a bare
        `.jinja` with no tokenizer_config.json or special_tokens_map.json beside it. Rendering then fails
        where the template prints one; `streamparse serve` refuses to start (`--special-token NAME=TEXT`)."""
        return frozenset(name for name in self._free_variables() & set(_SPECIAL_TOKEN_KEYS)
                         if name not in self.special_tokens)

    def _free_variables(self) -> frozenset[str]:
        env = _environment()
        named = self.source if isinstance(self.source, tuple) else (("default", self.source),)
        return frozenset().union(*(jinja2.meta.find_undeclared_variables(env.parse(text)) for _, text in named))

    def _kwargs_read(self) -> frozenset[str]:
        env = _environment()
        named = self.source if isinstance(self.source, tuple) else (("default", self.source),)
        read: set[str] = set()
        for _, text in named:
            tree = env.parse(text)
            # A name the template sets itself is a kwarg only when it is first tested `is defined`
            # (Llama's `date_string`); otherwise it is a loop or macro variable jinja counts as free.
            stored = {node.name for node in tree.find_all(jinja2.nodes.Name) if node.ctx in ("store", "param")}
            tested = {node.node.name for node in tree.find_all(jinja2.nodes.Test)
                      if node.name in ("defined", "undefined") and isinstance(node.node, jinja2.nodes.Name)}
            read |= {name for name in jinja2.meta.find_undeclared_variables(tree)
                     if name not in stored or name in tested}
        return frozenset(read - _GIVEN)

    def prepare(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
                add_generation_prompt: bool = True, **kwargs: Any) -> dict[str, Any]:
        """The template variables for a request: its messages prepared (see `_prepare_message`), the
        special tokens, `kwargs`, and the workarounds for what the template cannot render (see
        docs/server.md). Raises `CapabilityError` for what it cannot render and has no workaround for."""
        caps = self.capabilities
        messages = list(messages)
        if not self.renders_developer:  # OpenAI's system instructions under their newer name
            messages = [{**m, "role": "system"} if m.get("role") == "developer" else m for m in messages]
        roles = [m.get("role") for m in messages]
        if "system" in roles[1:] and not caps.later_system and any(
                role != "system" for role in roles[:max(i for i, r in enumerate(roles) if r == "system")]):
            raise CapabilityError("later_system", "this chat template does not render a system message after "
                                                  "the first turn; put the system text in the first message")
        if any(m.get("tool_calls") for m in messages):
            if not caps.tool_calls:
                raise CapabilityError("tool_calls", "this chat template does not render assistant tool calls")
            if not caps.parallel_tool_calls and any(
                    isinstance(m.get("tool_calls"), list) and len(m["tool_calls"]) > 1 for m in messages):
                raise CapabilityError("parallel_tool_calls", "this chat template renders only one tool call "
                                                             "per assistant turn; send one call per turn")
        if "tool" in roles and not caps.tool_results:
            raise CapabilityError("tool_results", "this chat template does not render tool results")
        if tools and not caps.tools:
            messages = _with_system(messages, _TOOLS_PREAMBLE + json.dumps(list(tools), indent=2, ensure_ascii=False))
            tools = None
        if "system" in roles and not caps.system_role:
            messages = _system_into_user(messages)
        return self._variables(messages, tools, add_generation_prompt, kwargs, caps.null_content, caps.arguments)

    def render(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
               add_generation_prompt: bool = True, **kwargs: Any) -> str:
        """The prompt text, as `tokenizer.apply_chat_template(..., tokenize=False)` gives it.
        `kwargs` are extra template variables (`enable_thinking`, `reasoning_effort`, ...).
        Raises `TemplateRenderError` when the template rejects or cannot render the messages
        (`CapabilityError` when it lacks a capability the request needs)."""
        return self._render_prepared(self.prepare(messages, tools, add_generation_prompt, **kwargs))


def _content_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return _text_of(content) if isinstance(content, list) else str(content or "")


def _with_system(messages: list[Mapping[str, Any]], text: str) -> list[Mapping[str, Any]]:
    """`text` added to the leading system message (after a blank line), or as one (llama.cpp's `add_system`)."""
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{_content_text(first)}\n\n{text}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _system_into_user(messages: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """For a template with no system role: system text goes before the next user message's, one line
    apart (llama.cpp's `polyfill_system_role`); with no user message after it, as a user message."""
    result: list[Mapping[str, Any]] = []
    pending: list[str] = []
    for message in messages:
        if message.get("role") == "system":
            pending.append(_content_text(message))
            continue
        if pending and message.get("role") == "user":
            result.append({**message, "content": "\n".join([*pending, _content_text(message)])})
        else:
            if pending:
                result.append({"role": "user", "content": "\n".join(pending)})
            result.append(message)
        pending = []
    if pending:
        result.append({"role": "user", "content": "\n".join(pending)})
    return result


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
    `tokenizer.json` beside it when there is one. A GGUF model file gives its template (named ones too,
    `tool_use` rendering requests with tools), special tokens and, where `streamparse.gguf_metadata`
    can build it, its tokenizer (`tokenizer_file` is then the GGUF file; else None).
    Raises `OSError` when nothing can be read, `ValueError` when what is there holds no template."""
    path = Path(path)
    if path.is_file() and (path.suffix == ".gguf" or is_gguf(path)):  # a llama.cpp model file: all inside it
        return ChatTemplate(chat_templates(path), special_tokens(path), str(path),
                            None if tokenizer_problem(path) else str(path))
    folder = path if path.is_dir() else path.parent
    tokens: dict[str, str] = {}
    response_template = None
    # special_tokens_map.json first, tokenizer_config.json over it (transformers reads both; the
    # config's own values win). tokenizer.json names no roles (which token is bos), so it adds none.
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        if (folder / name).is_file():
            config = _read_json(folder / name)
            tokens.update({key: text for key in _SPECIAL_TOKEN_KEYS
                           if (text := _token_text(config.get(key))) is not None})
            if isinstance(config.get("response_template"), Mapping):  # where transformers keeps it
                response_template = config["response_template"]
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
    return ChatTemplate(source, tokens, str(path), str(tokenizer_file) if tokenizer_file.is_file() else None,
                        response_template=response_template)

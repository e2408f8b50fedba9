"""streamparse as vLLM's tool-call and reasoning parser (`pip install 'streamparse[vllm]'`).

vLLM holds one parser pair per request and calls the reasoning half until it says the reasoning
ended (`has_engine_confirmed_reasoning_end`), then hands the tool half the content the reasoning half
returned, and the deltas after it. Here that content is the raw text after
`StreamParser.reasoning_end`, which the tool half reads with `StreamParser.after_reasoning`: each half
has its own `StreamParser`, and the raw text is the handover, so no table keyed by request is needed
(the reasoning half is never shown the request). With `engine_based_streaming` vLLM passes only the
new text and calls `finish_streaming()` once at the end: `feed()` and `close()`.

`register()` (the `vllm.general_plugins` entry point, run in every vLLM process) names the pair
`streamparse_<format or alias>` for every format, and `streamparse`, which detects the format from
the model's chat template when it is made. vLLM is imported when this module is, never by
`import streamparse`. No format is named here: the classes are made from `streamparse.formats()`."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.reasoning.abs_reasoning_parsers import ReasoningParser, ReasoningParserManager
from vllm.sampling_params import StructuredOutputsParams
from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager

from .. import Tools, detect_format, grammar_for, thinking_forced_open
from ..engine.parser import StreamParser
from ..registry import get_format
from ..types import Delta
from . import parser_names

logger = logging.getLogger("streamparse.vllm")
AUTO = "streamparse"


def _format_of(cls: type, tokenizer: Any) -> str:
    """The class's format, or (`streamparse`) the one the tokenizer's chat template is written for."""
    name: str | None = getattr(cls, "format_name", None)
    if name is not None:
        return name
    template = getattr(tokenizer, "chat_template", None)
    found = detect_format(template) if template else None
    if found is None:
        raise ValueError("streamparse could not tell the output format from the model's chat template; "
                         "name it: --tool-call-parser streamparse_<format> (streamparse.formats() lists them)")
    logger.info("streamparse: the chat template is read as format %r", found)
    return found


def _tool_dicts(tools: Any) -> list[dict[str, Any]]:
    """vLLM's tool models as the request's JSON."""
    return [tool.model_dump(exclude_none=True) if hasattr(tool, "model_dump") else tool for tool in tools or ()]


def _tools(tools: Any) -> Tools | None:
    """vLLM's tool models as streamparse's checked `Tools` (None when the request has none)."""
    return Tools(_tool_dicts(tools)) if tools else None


def _forced_tag(format_name: str, request: Any) -> dict[str, Any] | None:
    """streamparse's structural tag of the whole output for a request that forces calls (tool_choice
    "required" or a named function, `parallel_tool_calls` false, or a strict tool), None for one that
    forces none (no tools, "none", or "auto" with parallel calls and no strict tool). The prompt's
    reasoning is not known here, and need not be: with a reasoning parser, vLLM starts the grammar where
    that parser says the reasoning ended (on a prompt that leaves it open, after its end), and the tag's
    reasoning block is optional, so the grammar holds in both cases."""
    tools = _tool_dicts(getattr(request, "tools", None))
    choice = getattr(request, "tool_choice", None) or "auto"
    if not tools or choice == "none":
        return None
    if not isinstance(choice, str):
        choice = choice.model_dump(exclude_none=True) if hasattr(choice, "model_dump") else choice
    parallel = getattr(request, "parallel_tool_calls", None) is not False
    strict = any((tool.get("function") or {}).get("strict") is True for tool in tools)
    if choice == "auto" and parallel and not strict:
        return None
    tag = grammar_for(format_name, Tools(tools), tool_choice=choice, parallel_tool_calls=parallel,
                      syntax="structural_tag")
    assert isinstance(tag, dict)  # the structural_tag syntax is a dict
    return tag


def _delta(deltas: list[Delta], content: str | None = None) -> DeltaMessage | None:
    """streamparse's deltas as one vLLM delta (None when they carry nothing)."""
    text = "".join(delta.content for delta in deltas) if content is None else content
    reasoning = "".join(delta.reasoning for delta in deltas)
    calls = [DeltaToolCall(index=call.index, id=call.id, type="function" if call.id else None,
                           function=DeltaFunctionCall(name=call.name, arguments=call.arguments))
             for delta in deltas for call in delta.tool_calls]
    if not (text or reasoning or calls):
        return None
    return DeltaMessage(content=text or None, reasoning=reasoning or None, tool_calls=calls)


class _Probe:
    """The ids of one output read so far, decoded a step at a time as vLLM's detokenizer does: the
    new ids with the previous step's before them (so a tokenizer that spells a word's leading space by
    what precedes it decodes alike), the new text what that adds; nothing while the text ends in an
    unfinished character (U+FFFD)."""

    _CHECKED = 16  # ids compared at the end of what was read: speculative tokens taken back change them

    def __init__(self, parser: StreamParser) -> None:
        self.parser = parser
        self.ids: list[int] = []
        self.prefix = self.done = 0  # ids[prefix:done] decoded last; ids[:done] fed

    def extends(self, input_ids: Sequence[int]) -> bool:
        start = max(0, self.done - self._CHECKED)
        return len(input_ids) >= self.done and list(input_ids[start:self.done]) == self.ids[start:self.done]

    def read(self, input_ids: Sequence[int], tokenizer: Any) -> None:
        if len(input_ids) == self.done:
            return
        del self.ids[self.done:]
        self.ids.extend(input_ids[self.done:])
        before = tokenizer.decode(self.ids[self.prefix:self.done]) if self.done > self.prefix else ""
        text = tokenizer.decode(self.ids[self.prefix:])
        if text.endswith("\ufffd"):
            return  # an unfinished character: read again with the next ids
        self.parser.feed(text[len(before):])
        self.prefix, self.done = self.done, len(self.ids)


class StreamparseReasoningParser(ReasoningParser):  # type: ignore[misc]
    """The reasoning of one output; its content is the raw text after the reasoning ended."""

    format_name: str | None = None
    engine_based_streaming = True

    def __init__(self, tokenizer: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        self.format = _format_of(type(self), tokenizer)
        self._spec = get_format(self.format)
        self._forced = False  # set from the prompt (`adjust_initial_state_from_prompt`)
        self._parser: StreamParser | None = None
        self._raw: list[str] | None = []  # the text fed, until the reasoning's end is known
        self._prompt: Sequence[int] | None = None

    # -- where the reasoning is
    @property
    def reasoning_start_str(self) -> str | None:
        return self._spec.reasoning[0][0] if self._spec.reasoning else None

    @property
    def reasoning_end_str(self) -> str | None:
        return self._spec.reasoning[0][1] if self._spec.reasoning else None

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        """The request's prompt (vLLM gives it before the output, streamed or whole): one that ends
        inside reasoning (a template that opens `<think>`) forces the reasoning open."""
        self._prompt = prompt_token_ids
        self._forced = thinking_forced_open(self.model_tokenizer.decode(list(prompt_token_ids)), self.format)

    def adjust_initial_state_from_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        self.set_prompt_token_ids(prompt_token_ids)

    def _end_of(self, input_ids: Sequence[int]) -> int | None:
        parser = StreamParser(self.format, thinking_forced_open=self._forced)
        parser.feed(self.model_tokenizer.decode(list(input_ids)))
        return parser.reasoning_end

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Iterable[int]) -> bool:
        """`is_reasoning_end` on a decode step. vLLM's structured output asks on every step while the
        reasoning goes on, with every id so far (its default: `is_reasoning_end(input_ids)`, which reads
        them all again: O(n²) over a long reasoning). Here the ids already read are kept (`_Probe`) and
        only the new ones are decoded and fed: O(n) over the output."""
        probe = self._probe
        if probe is None or not probe.extends(input_ids):  # the first step, or ids taken back (speculation)
            probe = self._probe = _Probe(StreamParser(self.format, thinking_forced_open=self._forced))
        probe.read(input_ids, self.model_tokenizer)
        return probe.parser.reasoning_end is not None

    _probe: _Probe | None = None

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        """Whether the reasoning ended in these output ids. On the prompt (vLLM asks once, before the
        output) never: the output's own start decides."""
        if self._prompt is not None and list(input_ids) == list(self._prompt):
            return False
        return self._end_of(input_ids) is not None

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        """The ids after the reasoning: the shortest tail whose text is the text after its end."""
        text = self.model_tokenizer.decode(list(input_ids))
        end = self._end_of(input_ids)
        if end is None:
            return []
        rest = len(text) - end
        for cut in range(len(input_ids), -1, -1):
            if len(self.model_tokenizer.decode(list(input_ids[cut:]))) >= rest:
                return list(input_ids[cut:])
        return list(input_ids)

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._parser is not None and self._parser.reasoning_end is not None

    # -- reading
    def adjust_request(self, request: Any) -> Any:
        request.skip_special_tokens = False  # the format's delimiters must reach the parser
        return request

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        parser = StreamParser(self.format, thinking_forced_open=self._forced)
        parser.feed(model_output)
        parser.close()
        end = parser.reasoning_end
        assert end is not None  # always set after close()
        return parser.message.reasoning or None, model_output[end:] or None

    def _stream(self, deltas: list[Delta], chunk: str) -> DeltaMessage | None:
        parser = self._parser
        assert parser is not None
        end = parser.reasoning_end
        content = ""
        if self._raw is None:
            content = chunk
        else:
            self._raw.append(chunk)
            if end is not None:
                content, self._raw = "".join(self._raw)[end:], None
        return _delta(deltas, content)

    def extract_reasoning_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                    previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                    delta_token_ids: Sequence[int]) -> DeltaMessage | None:
        if self._parser is None:
            self._parser = StreamParser(self.format, thinking_forced_open=self._forced)
        return self._stream(self._parser.feed(delta_text), delta_text)

    def finish_streaming(self) -> DeltaMessage | None:
        """Called when the reasoning ended (what is held goes on) and at the end of the output."""
        if self._parser is None:
            return None
        if self._raw is None and self._parser.reasoning_end is not None and not self._closing:
            self._closing = True
            return None  # the content after the end already went on with the delta that ended it
        # The end of the output inside the reasoning: no tool half follows (vLLM reads none after it),
        # so what the parser made content is sent as content.
        return _delta(self._parser.close())

    _closing = False


class StreamparseToolParser(ToolParser):  # type: ignore[misc]
    """Content and calls of the raw text after the reasoning (what the reasoning half hands on)."""

    format_name: str | None = None
    engine_based_streaming = True
    # Forced calls (tool_choice "required" or named) are written in the format's own syntax under
    # streamparse's structural tag (`adjust_request`) and read by `extract_tool_calls`, not as vLLM's
    # JSON list.
    supports_required_and_named = False

    def __init__(self, tokenizer: Any, tools: Any = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, tools)
        self.format = _format_of(type(self), tokenizer)
        self._parser: StreamParser | None = None

    def adjust_request(self, request: Any) -> Any:
        """The format's delimiters reach the parser (`skip_special_tokens` off), and a request that
        forces calls has vLLM enforce streamparse's structural tag of the format (`grammar_for`)."""
        request = super().adjust_request(request)
        request.skip_special_tokens = False
        tag = _forced_tag(self.format, request)
        if tag is not None:
            request.structured_outputs = StructuredOutputsParams(structural_tag=json.dumps(tag, ensure_ascii=False))
            request.response_format = None  # one constraint per request: the call is the answer
        return request

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        parser = StreamParser.after_reasoning(self.format, _tools(getattr(request, "tools", None)))
        parser.feed(model_output)
        parser.close()
        message = parser.message
        calls = [ToolCall(id=call.id, type="function", function=FunctionCall(name=call.name,
                                                                            arguments=call.arguments_json))
                 for call in message.tool_calls]
        return ExtractedToolCallInformation(tools_called=bool(calls), tool_calls=calls,
                                            content=message.content or None)

    def extract_tool_calls_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                     previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                     delta_token_ids: Sequence[int], request: Any) -> DeltaMessage | None:
        if self._parser is None:
            self._parser = StreamParser.after_reasoning(self.format, _tools(getattr(request, "tools", None)))
        deltas = self._parser.feed(delta_text)
        self._note(deltas)
        return _delta(deltas) or DeltaMessage()

    def finish_streaming(self) -> DeltaMessage | None:
        if self._parser is None:
            return None
        deltas = self._parser.close()
        self._note(deltas)
        return _delta(deltas)

    def _note(self, deltas: list[Delta]) -> None:
        """vLLM's record of streamed calls (it appends what it thinks is unstreamed from it)."""
        for delta in deltas:
            for call in delta.tool_calls:
                while len(self.prev_tool_call_arr) <= call.index:
                    self.prev_tool_call_arr.append({"name": call.name, "arguments": ""})
                    self.streamed_args_for_tool.append("")
                self.prev_tool_call_arr[call.index]["arguments"] += call.arguments
                self.streamed_args_for_tool[call.index] += call.arguments


def _class_name(kind: str, name: str) -> str:
    return f"Streamparse{kind}_{name}"


# Module attributes vLLM's lazy registration names: one pair per format and alias, and the detecting pair.
for _parser_name, _format_name in {**parser_names(), AUTO: None}.items():
    _key = _format_name or AUTO
    globals()[_class_name("ToolParser", _key)] = type(_class_name("ToolParser", _key), (StreamparseToolParser,),
                                                      {"format_name": _format_name})
    globals()[_class_name("ReasoningParser", _key)] = type(
        _class_name("ReasoningParser", _key), (StreamparseReasoningParser,), {"format_name": _format_name})


def register() -> None:
    """Name `streamparse_<name>` for every format and alias, and `streamparse`, in vLLM's managers."""
    for parser_name, format_name in {**parser_names(), AUTO: None}.items():
        key = format_name or AUTO
        if parser_name not in ToolParserManager.tool_parsers and parser_name not in ToolParserManager.lazy_parsers:
            ToolParserManager.register_lazy_module(parser_name, __name__, _class_name("ToolParser", key))
        if parser_name not in ReasoningParserManager.lazy_parsers and \
                parser_name not in getattr(ReasoningParserManager, "reasoning_parsers", {}):
            ReasoningParserManager.register_lazy_module(parser_name, __name__, _class_name("ReasoningParser", key))


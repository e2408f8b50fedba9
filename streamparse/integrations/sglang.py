"""streamparse as SGLang's tool-call and reasoning parser (`pip install 'streamparse[sglang]'`).

SGLang runs a reasoning detector, then hands a tool detector the text it calls normal. Here the
reasoning detector is a `StreamParser` that sends the reasoning and hands on the raw text after
`StreamParser.reasoning_end`; the tool detector reads that text with `StreamParser.after_reasoning`,
so content and calls are those of `streamparse.parse` of the whole output, under any chunking.

`register()` (the `sglang.srt.plugins` entry point, run in every SGLang process before its arguments
are read) adds a detector pair per format and alias, `streamparse_<name>`, to
`FunctionCallParser.ToolCallParserEnum` and `ReasoningParser.DetectorMap`; then
`--tool-call-parser streamparse_hermes --reasoning-parser streamparse_hermes` works. SGLang is
imported when this module is, never by `import streamparse`. No format is named here."""

from __future__ import annotations

import json
from typing import Any

from sglang.srt.function_call.base_format_detector import BaseFormatDetector
from sglang.srt.function_call.core_types import StreamingParseResult, ToolCallItem
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.parser.reasoning_parser import BaseReasoningFormatDetector, ReasoningParser
from sglang.srt.parser.reasoning_parser import StreamingParseResult as ReasoningResult

from .. import Tools, grammar_for
from ..engine.parser import StreamParser
from ..types import Delta
from . import parser_names


def _tools(tools: Any) -> Tools | None:
    """SGLang's `Tool` models as streamparse's checked `Tools` (None when the request has none)."""
    if not tools:
        return None
    return Tools([tool.model_dump(exclude_none=True) if hasattr(tool, "model_dump") else tool for tool in tools])


def _calls(deltas: list[Delta]) -> list[ToolCallItem]:
    return [ToolCallItem(tool_index=call.index, name=call.name, parameters=call.arguments)
            for delta in deltas for call in delta.tool_calls]


class StreamparseReasoningDetector(BaseReasoningFormatDetector):  # type: ignore[misc]
    """Reasoning of one output; normal text is the raw text after the reasoning ended."""

    format_name = "hermes"

    def __init__(self, stream_reasoning: bool = True, force_reasoning: bool = False, **_: Any) -> None:
        super().__init__("", "", force_reasoning=force_reasoning, stream_reasoning=stream_reasoning)
        self._parser = StreamParser(self.format_name, thinking_forced_open=bool(force_reasoning))
        self._raw: list[str] | None = []  # the text fed, until the reasoning's end is known
        self._held_reasoning: list[str] = []  # stream_reasoning=False: sent when the reasoning ends

    def _result(self, deltas: list[Delta], chunk: str) -> ReasoningResult:
        reasoning = "".join(delta.reasoning for delta in deltas)
        end = self._parser.reasoning_end
        if self._raw is None:  # the reasoning ended before this chunk: all of it goes on
            normal = chunk
        else:
            self._raw.append(chunk)
            normal = ""
            if end is not None:
                normal, self._raw = "".join(self._raw)[end:], None
        if not self.stream_reasoning:
            self._held_reasoning.append(reasoning)
            reasoning = "".join(self._held_reasoning) if end is not None else ""
            if end is not None:
                self._held_reasoning = []
        return ReasoningResult(normal_text=normal, reasoning_text=reasoning)

    def parse_streaming_increment(self, new_text: str) -> ReasoningResult:
        return self._result(self._parser.feed(new_text), new_text)

    def finish(self) -> ReasoningResult:
        return self._result(self._parser.close(), "")

    def detect_and_parse(self, text: str) -> ReasoningResult:
        parser = StreamParser(self.format_name, thinking_forced_open=self.force_reasoning)
        parser.feed(text)
        parser.close()
        end = parser.reasoning_end
        assert end is not None  # always set after close()
        return ReasoningResult(normal_text=text[end:], reasoning_text=parser.message.reasoning)


class StreamparseToolDetector(BaseFormatDetector):  # type: ignore[misc]
    """Content and calls of the raw text after the reasoning (what the reasoning detector hands on)."""

    format_name = "hermes"

    def __init__(self, **_: Any) -> None:
        super().__init__()
        self._parser: StreamParser | None = None

    def _stream(self, tools: Any) -> StreamParser:
        if self._parser is None:
            self._parser = StreamParser.after_reasoning(self.format_name, _tools(tools))
        return self._parser

    def parse_streaming_increment(self, new_text: str, tools: Any) -> StreamingParseResult:
        deltas = self._stream(tools).feed(new_text)
        return StreamingParseResult(normal_text="".join(delta.content for delta in deltas), calls=_calls(deltas))

    def finish(self, tools: Any) -> StreamingParseResult:
        deltas = self._stream(tools).close()
        return StreamingParseResult(normal_text="".join(delta.content for delta in deltas), calls=_calls(deltas))

    def detect_and_parse(self, text: str, tools: Any) -> StreamingParseResult:
        parser = StreamParser.after_reasoning(self.format_name, _tools(tools))
        parser.feed(text)
        parser.close()
        message = parser.message
        return StreamingParseResult(normal_text=message.content, calls=[
            ToolCallItem(tool_index=index, name=call.name, parameters=call.arguments_json)
            for index, call in enumerate(message.tool_calls)])

    def has_tool_call(self, text: str) -> bool:
        """True where the format's parser reads the text as anything but itself (a call, framing), so
        that SGLang takes `detect_and_parse`'s content and calls rather than the text as written."""
        parser = StreamParser.after_reasoning(self.format_name)
        parser.feed(text)
        parser.close()
        message = parser.message
        return bool(message.tool_calls or message.rejected) or message.content != text

    def supports_structural_tag(self) -> bool:
        return True

    def structure_info(self) -> Any:
        """SGLang's legacy per-tool begin/end tags: streamparse constrains whole outputs instead,
        through `get_structural_tag` (`streamparse.grammar_for`), so this is not offered."""
        raise NotImplementedError("streamparse detectors constrain calls with get_structural_tag (grammar_for)")

    def get_structural_tag(self, tools: Any = None, tool_choice: Any = "auto", thinking_mode: bool = False,
                           parallel_tool_calls: bool = True) -> Any:
        """The format's whole output under `tool_choice` (`streamparse.grammar_for`), as xgrammar's tag."""
        import xgrammar

        choice = tool_choice.model_dump() if hasattr(tool_choice, "model_dump") else tool_choice
        if isinstance(choice, dict) and "type" not in choice:
            choice = {"type": "function", **choice}
        tag = grammar_for(self.format_name, _tools(tools), tool_choice=choice,
                          parallel_tool_calls=parallel_tool_calls, thinking_forced_open=thinking_mode)
        return xgrammar.StructuralTag.from_json(json.dumps(tag))


def detectors(name: str) -> tuple[type[StreamparseToolDetector], type[StreamparseReasoningDetector]]:
    """The detector pair that reads format `name` (a format or alias name)."""
    suffix = name.title().replace("_", "")
    tool = type(f"Streamparse{suffix}Detector", (StreamparseToolDetector,), {"format_name": name})
    reasoning = type(f"Streamparse{suffix}ReasoningDetector", (StreamparseReasoningDetector,), {"format_name": name})
    return tool, reasoning


def register() -> None:
    """Add `streamparse_<name>` for every format and alias to SGLang's parser tables."""
    for parser_name, format_name in parser_names().items():
        tool, reasoning = detectors(format_name)
        FunctionCallParser.ToolCallParserEnum.setdefault(parser_name, tool)
        ReasoningParser.DetectorMap.setdefault(parser_name, reasoning)

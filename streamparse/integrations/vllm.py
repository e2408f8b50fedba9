"""streamparse as vLLM's tool-call and reasoning parser (`pip install 'streamparse[vllm]'`).

vLLM holds one parser pair per request and calls the reasoning half until it says the reasoning
ended (`has_engine_confirmed_reasoning_end`), then hands the tool half the content the reasoning half
returned, and the deltas after it. Here that content is the raw text after
`StreamParser.reasoning_end`, which the tool half reads with `StreamParser.after_reasoning`: each half
has its own `StreamParser`, and the raw text is the handover, so no table keyed by request is needed
(the reasoning half is never shown the request). With `engine_based_streaming` vLLM passes only the
new text and calls `finish_streaming()` once at the end: `feed()` and `close()`. Where the format's
special delimiters are tokens of the tokenizer, a streamed output is read token-aware from the step's
ids (`delta_token_ids`) and text (`_TokenReader`), and the reasoning half hands on the ids of the text it
hands on (`extract_content_ids`); vLLM gives a whole output's parsers its text only.

`register()` (the `vllm.general_plugins` entry point, run in every vLLM process) names the pair
`streamparse_<format or alias>` for every format, and `streamparse`, which detects the format from
the model's chat template when it is made. vLLM is imported when this module is, never by
`import streamparse`. No format is named here: the classes are made from `streamparse.formats()`."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
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
from ..types import Delta, Token
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


def _token_strict(node: Any, ids: dict[str, int], pattern: re.Pattern[str]) -> Any:
    """A structural tag whose literal text spells the format's special delimiters as those tokens
    (xgrammar's `{"type": "token"}`), so that the engine lets the model write a delimiter only as its
    token: what a token-aware reading counts (its text spelled with ordinary tokens would be content)."""
    if isinstance(node, list):
        return [_token_strict(item, ids, pattern) for item in node]
    if not isinstance(node, dict):
        return node
    value = node.get("value")
    if node.get("type") == "const_string" and isinstance(value, str) and pattern.search(value):
        elements = [{"type": "token", "token": ids[part]} if part in ids else {"type": "const_string", "value": part}
                    for part in pattern.split(value) if part]
        return elements[0] if len(elements) == 1 else {"type": "sequence", "elements": elements}
    return {key: _token_strict(item, ids, pattern) for key, item in node.items()}


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


_SPECIALS: dict[tuple[int, str], tuple[Any, dict[int, str]]] = {}


def token_aware(format_name: str) -> bool:
    """Whether the format is read token-aware through vLLM (given a tokenizer that has its special
    delimiters as tokens): `FormatSpec.calls_start_at_special_tokens`."""
    return get_format(format_name).calls_start_at_special_tokens


def _special_ids(tokenizer: Any, format_name: str) -> dict[int, str]:
    """The ids of the format's special delimiters (`FormatSpec.special`) when it is read token-aware
    (`token_aware`) and every one of them is one added token of the tokenizer, else none (the output is
    then read as text). Worked out once per tokenizer and format (vLLM shares one tokenizer across
    requests)."""
    key = (id(tokenizer), format_name)
    known = _SPECIALS.get(key)
    if known is not None and known[0] is tokenizer:
        return known[1]
    delimiters = get_format(format_name).special if token_aware(format_name) else ()
    added = getattr(tokenizer, "get_added_vocab", None)
    vocabulary: dict[str, int] = added() if callable(added) and delimiters else {}
    ids = {vocabulary[text]: text for text in delimiters} if all(text in vocabulary for text in delimiters) else {}
    if delimiters and not ids:
        logger.info("streamparse: not every delimiter of %r is one token of this tokenizer (%s): "
                    "the output is read as text", format_name, ", ".join(delimiters))
    _SPECIALS[key] = (tokenizer, ids)
    return ids


class _TokenReader:
    """One output's steps (their token ids and text, as vLLM gives them) as streamparse `Token`s: an id
    of one of the format's special delimiters is `Token(its text, True)`, the text between such ids
    ordinary, so a delimiter the model spelled with ordinary tokens is text (`special_tokens="require"`).
    Each special id is looked for in its step's text after the ordinary ids before it (their decoding
    gives where, less a few characters for a context-dependent decoding); only those runs are decoded.

    A step whose ids do not account for its text (no ids for a text, or a special id whose text is not
    where it should be: vLLM holds text back while a `stop` string could be forming) turns the reader to
    text for the rest of the output: each delimiter's text then counts, as when reading text."""

    def __init__(self, tokenizer: Any, specials: dict[int, str]) -> None:
        self.tokenizer = tokenizer
        self.specials = specials
        self.text_mode = False
        self._held = ""  # text mode: the output's end, which may be a delimiter's start
        ordered = sorted(set(specials.values()), key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered)))
        self._prefixes = {text[:cut] for text in ordered for cut in range(1, len(text))}
        self.found: list[tuple[int, int]] = []  # the last step's special ids: (index in its ids, offset in its text)

    def read(self, ids: Sequence[int], text: str) -> list[Token]:
        self.found = []
        if not self.text_mode:
            pieces = self._split(ids, text)
            if pieces is not None:
                return pieces
            self.text_mode = True
            self.found = []
            logger.info("streamparse: a step's token ids do not match its text; the rest of the output is read "
                        "as text")
        return self._text(text)

    def _split(self, ids: Sequence[int], text: str) -> list[Token] | None:
        if text and not ids:
            return None
        pieces: list[Token] = []
        position = 0
        run: list[int] = []
        for index, token_id in enumerate(ids):
            content = self.specials.get(token_id)
            if content is None:
                run.append(token_id)
                continue
            start = position + max(0, len(self.tokenizer.decode(run)) - 3) if run else position
            found = text.find(content, start)
            if found < 0:
                return None
            if found > position:
                pieces.append(Token(text[position:found], False))
            pieces.append(Token(content, True))
            self.found.append((index, found))
            position = found + len(content)
            run = []
        if position < len(text):
            pieces.append(Token(text[position:], False))
        return pieces

    def _text(self, text: str) -> list[Token]:
        text = self._held + text
        pieces: list[Token] = []
        position = 0
        for match in self._pattern.finditer(text):
            if match.start() > position:
                pieces.append(Token(text[position:match.start()], False))
            pieces.append(Token(match.group(), True))
            position = match.end()
        keep = next((cut for cut in range(min(len(text) - position, max(map(len, self._prefixes), default=0)), 0, -1)
                     if text[len(text) - cut:] in self._prefixes), 0)
        if len(text) - keep > position:
            pieces.append(Token(text[position:len(text) - keep], False))
        self._held = text[len(text) - keep:]
        return pieces

    def flush(self) -> list[Token]:
        """What text mode held back, at the end of the output."""
        held, self._held = self._held, ""
        return [Token(held, False)] if held else []


def _joined(tokens: list[Token]) -> str:
    return "".join(str(token.text) for token in tokens)


def _first(low: int, high: int, holds: Callable[[int], bool]) -> int:
    """The least `n` in [low, high] for which `holds` (which stays true from there up), else `high`."""
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle + 1
    return low


class _Feed:
    """One half's `StreamParser` and how it reads vLLM's steps: token-aware (`special_tokens="require"`,
    each step's ids and text as `Token`s, `_TokenReader`) where the format's delimiters are tokens of the
    tokenizer and the first step that carries text carries ids too; else the text."""

    def __init__(self, make: Callable[..., StreamParser], tokenizer: Any, specials: dict[int, str],
                 ids: Sequence[int], text: str) -> None:
        token_aware = bool(specials) and (bool(ids) or not text)
        self.reader = _TokenReader(tokenizer, specials) if token_aware else None
        self.parser = make(special_tokens="require") if token_aware else make()

    def feed(self, ids: Sequence[int], text: str) -> tuple[list[Delta], str]:
        """The deltas of one step, and the text it fed (text mode may hold a delimiter's start back)."""
        if self.reader is None:
            return self.parser.feed(text), text
        tokens = self.reader.read(ids, text)
        return self.parser.feed(tokens), _joined(tokens)

    def close(self) -> list[Delta]:
        deltas = self.parser.feed(self.reader.flush()) if self.reader is not None else []
        return deltas + self.parser.close()


class _Probe:
    """The ids of one output read so far, decoded a step at a time as vLLM's detokenizer does: the
    new ids with the previous step's before them (so a tokenizer that spells a word's leading space by
    what precedes it decodes alike), the new text what that adds; nothing while the text ends in an
    unfinished character (U+FFFD)."""

    _CHECKED = 16  # ids compared at the end of what was read: speculative tokens taken back change them

    def __init__(self, parser: StreamParser, reader: _TokenReader | None) -> None:
        self.parser = parser
        self.reader = reader
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
        new = text[len(before):]
        self.parser.feed(new if self.reader is None else self.reader.read(self.ids[self.done:], new))
        self.prefix, self.done = self.done, len(self.ids)


class StreamparseReasoningParser(ReasoningParser):  # type: ignore[misc]
    """The reasoning of one output; its content is the raw text after the reasoning ended."""

    format_name: str | None = None
    engine_based_streaming = True

    def __init__(self, tokenizer: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        self.format = _format_of(type(self), tokenizer)
        self._spec = get_format(self.format)
        self._specials = _special_ids(tokenizer, self.format)
        self._forced = False  # set from the prompt (`adjust_initial_state_from_prompt`)
        self._feed: _Feed | None = None
        self._raw: list[str] | None = []  # the text fed, until the reasoning's end is known
        self._fed = 0  # characters fed
        self._content: list[str] = []  # content the parser made while the reasoning's end was not known
        # token-aware, until the reasoning's end is known: each step's first offset, ids, and its special
        # ids (index, offset, length), so that the content's ids can be handed on (`extract_content_ids`)
        self._steps: list[tuple[int, list[int], list[tuple[int, int, int]]]] = []
        self._content_ids: list[int] | None = None

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
        only the new ones are decoded and fed: O(n) over the output. Token-aware as the output is read."""
        probe = self._probe
        if probe is None or not probe.extends(input_ids):  # the first step, or ids taken back (speculation)
            options: dict[str, Any] = {"special_tokens": "require"} if self._specials else {}
            probe = self._probe = _Probe(StreamParser(self.format, thinking_forced_open=self._forced, **options),
                                         _TokenReader(self.model_tokenizer, self._specials) if self._specials else None)
        probe.read(input_ids, self.model_tokenizer)
        return probe.parser.reasoning_end is not None

    _probe: _Probe | None = None

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        """Whether the reasoning is over at the end of these ids. vLLM asks it of the prompt only: its
        per-request `Parser` before reading the output (True: no reasoning is read), and its chat serving
        where structured output starts (True: from the first token). True when the prompt ends (but for
        whitespace) with a reasoning closer of the format (a template that closes an empty `<think>`
        block); otherwise the output's own reading decides (the reasoning half, and on each decode step
        `is_reasoning_end_streaming`). A request whose calls streamparse's structural tag forces is
        constrained from the first token anyway (`StreamparseToolParser.adjust_request`)."""
        text = self.model_tokenizer.decode(list(input_ids)).rstrip()
        return any(text.endswith(closer) for _, closer in self._spec.reasoning)

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        """The ids after the reasoning. Streamed token-aware: the ids the content handed on was read from
        (the step's after the delimiter that ended it, and those of later steps when the end was known
        late), so the tool half reads it alike; else the shortest tail whose text is the text after it."""
        if self._content_ids is not None:
            ids, self._content_ids = self._content_ids, None
            return ids
        text = self.model_tokenizer.decode(list(input_ids))
        end = self._end_of(input_ids)
        if end is None:
            return []
        rest = len(text) - end
        # the largest cut whose tail decodes to the text after the end (the tail grows as the cut goes back)
        cut = _first(0, len(input_ids), lambda n: len(self.model_tokenizer.decode(list(input_ids[n + 1:]))) < rest)
        return list(input_ids[cut:])

    def _ids_after(self, end: int) -> list[int]:
        """The ids of the text fed from offset `end` on (token-aware), from the steps' record."""
        steps = self._steps
        k = _first(0, len(steps), lambda n: steps[n][0] >= end)  # the first step from `end` on, or the one holding it
        k = k if k < len(steps) and steps[k][0] == end else max(0, k - 1)
        start, ids, specials = steps[k]
        cut, after = 0, start
        for index, offset, length in specials:
            if offset >= end:
                break
            cut, after = index + 1, offset + length
        if after < end:  # inside ordinary text: from the first id whose text starts at or after `end`
            stop = next((index for index, offset, _ in specials if offset >= end), len(ids))
            run = ids[cut:stop]
            cut += _first(0, len(run), lambda n: len(self.model_tokenizer.decode(run[:n])) >= end - after)
        return ids[cut:] + [token_id for _, later, _ in steps[k + 1:] for token_id in later]

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._feed is not None and self._feed.parser.reasoning_end is not None

    # -- reading
    def adjust_request(self, request: Any) -> Any:
        request.skip_special_tokens = False  # the format's delimiters must reach the parser
        return request

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        """The whole output: vLLM gives its text only (not its ids), so it is read as text."""
        parser = StreamParser(self.format, thinking_forced_open=self._forced)
        parser.feed(model_output)
        parser.close()
        end = parser.reasoning_end
        assert end is not None  # always set after close()
        return parser.message.reasoning or None, model_output[end:] or None

    def extract_reasoning_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                    previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                    delta_token_ids: Sequence[int]) -> DeltaMessage | None:
        feed = self._feed
        if feed is None:
            if not delta_text and not delta_token_ids:
                return None
            feed = self._feed = _Feed(lambda **options: StreamParser(self.format, thinking_forced_open=self._forced,
                                                                     **options),
                                      self.model_tokenizer, self._specials, delta_token_ids, delta_text)
        start = self._fed
        deltas, chunk = feed.feed(delta_token_ids, delta_text)
        self._fed += len(chunk)
        reader = feed.reader
        if self._raw is None:
            return _delta(deltas, chunk)
        self._raw.append(chunk)
        if reader is not None and not reader.text_mode:
            self._steps.append((start, list(delta_token_ids),
                                [(index, start + offset, len(self._specials[delta_token_ids[index]]))
                                 for index, offset in reader.found]))
        end = feed.parser.reasoning_end
        if end is None:  # content made before the end is known goes on only if no tool half follows
            self._content.extend(delta.content for delta in deltas)
            return _delta(deltas, "")
        content, self._raw, self._content = "".join(self._raw)[end:], None, []
        if self._specials:  # read as text, it hands on no ids: the tool half reads the text too
            self._content_ids = self._ids_after(end) if reader is not None and not reader.text_mode else []
        self._steps = []
        return _delta(deltas, content)

    def finish_streaming(self) -> DeltaMessage | None:
        """Called when the reasoning ended (what is held goes on) and at the end of the output."""
        if self._feed is None:
            return None
        if self._raw is None and self._feed.parser.reasoning_end is not None and not self._closing:
            self._closing = True
            return None  # the content after the end already went on with the delta that ended it
        # The end of the output with the reasoning's end not known before: no tool half follows (vLLM reads
        # none after it), so what the parser made content is sent as content.
        deltas = self._feed.close()
        return _delta(deltas, "".join([*self._content, *(delta.content for delta in deltas)]))

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
        self._specials = _special_ids(tokenizer, self.format)
        self._feed: _Feed | None = None

    def adjust_request(self, request: Any) -> Any:
        """The format's delimiters reach the parser (`skip_special_tokens` off), and a request that
        forces calls has vLLM enforce streamparse's structural tag of the format (`grammar_for`; its
        delimiters as their tokens where the output is read token-aware)."""
        request = super().adjust_request(request)
        request.skip_special_tokens = False
        tag = _forced_tag(self.format, request)
        if tag is not None:
            if self._specials:  # read token-aware: the forced delimiters are written as their tokens
                ids = {text: token_id for token_id, text in self._specials.items()}
                pattern = re.compile("(" + "|".join(map(re.escape, sorted(ids, key=len, reverse=True))) + ")")
                tag = _token_strict(tag, ids, pattern)
            request.structured_outputs = StructuredOutputsParams(structural_tag=json.dumps(tag, ensure_ascii=False))
            request.response_format = None  # one constraint per request: the call is the answer
            if "_grammar_from_parser" in (getattr(request, "__private_attributes__", None) or {}):
                # The tag holds the format's optional reasoning block: vLLM constrains from the first token
                # (as for its Mistral grammar) instead of asking `is_reasoning_end` of the prompt.
                request._grammar_from_parser = True
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
        feed = self._feed
        if feed is None:
            if not delta_text and not delta_token_ids:
                return DeltaMessage()
            tools = _tools(getattr(request, "tools", None))
            feed = self._feed = _Feed(lambda **options: StreamParser.after_reasoning(self.format, tools, **options),
                                      self.model_tokenizer, self._specials, delta_token_ids, delta_text)
        deltas, _ = feed.feed(delta_token_ids, delta_text)
        self._note(deltas)
        return _delta(deltas) or DeltaMessage()

    def finish_streaming(self) -> DeltaMessage | None:
        if self._feed is None:
            return None
        deltas = self._feed.close()
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


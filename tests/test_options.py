"""One options list: every entry point, adapter and the CLI take every option, checked the same way."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from conftest import ids

import streamparse
from streamparse import Options, StreamParser, openai
from streamparse.cli import build_argparser, options_from_flags
from streamparse.options import OPTION_HELP, OPTION_NAMES, OptionFields

KEYWORDS = set(OptionFields.__annotations__)
ENTRY_POINTS = [streamparse.parse, streamparse.stream, streamparse.astream, StreamParser,
                openai.chat_chunks, openai.chat_message]
# A call that is rejected (unknown tool) and whose text goes back into content with on_rejected="content".
TEXT = 'Hi <tool_call>{"name": "nope", "arguments": {}}</tool_call>'
TOOLS = [{"name": "known", "parameters": {"type": "object"}}]
NON_DEFAULT: dict[str, Any] = {"emit_calls": "progressive", "tool_calls_in_reasoning": "extract", "id_factory": ids,
                               "prompt": "<think>\n", "on_rejected": "content", "max_call_chars": 1000,
                               "special_tokens": "ignore", "marker_suffix": ":x"}


def test_the_options_list_is_one_list() -> None:
    assert set(OPTION_NAMES) == KEYWORDS | {"format", "tools", "thinking_forced_open"}
    assert set(OPTION_HELP) == set(OPTION_NAMES)
    assert set(NON_DEFAULT) == KEYWORDS


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__qualname__)
def test_every_entry_point_takes_every_option(entry: Any) -> None:
    params = inspect.signature(entry).parameters
    assert {"format", "tools", "thinking_forced_open"} <= set(params)
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__qualname__)
def test_every_entry_point_rejects_an_unknown_option_by_name(entry: Any) -> None:
    with pytest.raises(TypeError, match="on_reject'"):
        finished = entry in (streamparse.parse, openai.chat_message)
        result = entry("x" if finished else ["x"], "hermes", on_reject="content")
        if inspect.isasyncgen(result):
            asyncio.run(result.__anext__())
        else:
            next(iter(result))


def test_a_bad_option_value_names_the_choices() -> None:
    with pytest.raises(ValueError, match="on_rejected must be one of 'report', 'content'"):
        Options(on_rejected="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_call_chars"):
        streamparse.parse("x", max_call_chars=0)
    for suffix in ("6124c78e", ":", ":a b", ":a:b", ":<x>", ":" + "x" * 65):  # `:` and 1-64 characters, or ""
        with pytest.raises(ValueError, match="marker_suffix must be '' or ':' and 1-64 characters"):
            streamparse.parse("x", "hy_v4", marker_suffix=suffix)
    with pytest.raises(ValueError, match=r"format 'hermes' spells its markers one way.*hy_v3, hy_v4"):
        streamparse.parse("x", "hermes", marker_suffix=":x")


def _content_and_names(result: Any) -> tuple[str, list[str]]:
    """What an entry point's result says: its content and the names of its calls."""
    if isinstance(result, StreamParser):
        result = result.message
    if isinstance(result, streamparse.Message):
        return result.content, [call.name for call in result.tool_calls]
    if isinstance(result, dict):  # an OpenAI message
        return result["content"] or "", [call["function"]["name"] for call in result.get("tool_calls") or []]
    deltas = [item["choices"][0]["delta"] if isinstance(item, dict) else item.to_openai() for item in result]
    return ("".join(delta.get("content") or "" for delta in deltas),
            [call["function"]["name"] for delta in deltas for call in delta.get("tool_calls") or []
             if call.get("function", {}).get("name")])


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__qualname__)
def test_every_entry_point_spells_the_markers_with_the_marker_suffix(entry: Any) -> None:
    text = "<tool_calls:x><tool_call:x>known</tool_call:x></tool_calls:x> <tool_calls:y>"
    if entry is StreamParser:
        result: Any = StreamParser("hy_v4", TOOLS, marker_suffix=":x")
        result.feed(text[:9])
        result.feed(text[9:])
        result.close()
    elif entry in (streamparse.parse, openai.chat_message):
        result = entry(text, "hy_v4", tools=TOOLS, marker_suffix=":x")
    elif entry is streamparse.astream:
        async def chunks() -> Any:
            for chunk in (text[:9], text[9:]):
                yield chunk

        async def drain() -> list[Any]:
            return [item async for item in entry(chunks(), "hy_v4", TOOLS, marker_suffix=":x")]

        result = asyncio.run(drain())
    else:
        result = list(entry(iter([text[:9], text[9:]]), "hy_v4", tools=TOOLS, marker_suffix=":x"))
    # The other spelling is text once the suffix is given.
    assert _content_and_names(result) == ("<tool_calls:y>", ["known"])


def test_the_adapters_apply_on_rejected_and_the_prompt() -> None:
    message = openai.chat_message("R</think>" + TEXT, "hermes", tools=TOOLS, prompt="<|im_start|>assistant\n<think>\n",
                                  on_rejected="content")
    assert message["reasoning_content"] == "R"
    assert message["content"] == TEXT
    chunks = list(openai.chat_chunks(iter([TEXT[:7], TEXT[7:]]), "hermes", tools=TOOLS, on_rejected="content",
                                     max_call_chars=5))
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert content == 'Hi <tool_call>{"nam</tool_call>'  # too_long keeps the first 5 characters


def test_the_cli_has_a_flag_for_every_option() -> None:
    opts = build_argparser().parse_args(
        ["parse", "--format", "mistral", "--forced-open", "--prompt", "p", "--emit", "progressive",
         "--tool-calls-in-reasoning", "extract", "--on-rejected", "content", "--max-call-chars", "9",
         "--special-tokens", "require", "--ids", "ordinal", "--marker-suffix", ":6124c78e"])
    options = options_from_flags(opts)
    assert options.with_changes(id_factory=None) == Options(
        "mistral", None, True, emit_calls="progressive", tool_calls_in_reasoning="extract", prompt="p",
        on_rejected="content", max_call_chars=9, special_tokens="require", marker_suffix=":6124c78e")
    assert options.id_factory is not None and options.id_factory(3) == "call_3"


def test_a_parser_from_shared_options_equals_one_from_keywords() -> None:
    options = Options("hermes", TOOLS, id_factory=ids, on_rejected="content")
    parser = StreamParser.from_options(options)
    parser.feed(TEXT)
    parser.close()
    assert parser.message == streamparse.parse(TEXT, "hermes", TOOLS, id_factory=ids, on_rejected="content")


def test_options_compile_the_tools_once_and_check_them_when_given() -> None:
    import pickle

    options = Options("hermes", TOOLS)
    assert isinstance(options.tools, streamparse.Tools)
    assert StreamParser.from_options(options)._tools.tools is options.tools  # shared, not compiled again
    assert pickle.loads(pickle.dumps(options.tools)) == options.tools  # workers receive it
    with pytest.raises(ValueError, match="known"):
        Options("hermes", [{"name": "known", "parameters": {"type": "object", "properties": {"a": {"$ref": "#/x"}}}}])


def test_parsers_given_the_same_format_and_tools_share_their_checked_options() -> None:
    # An agent loop's requests bring one compiled `Tools`: the frozen options are made once for them.
    tools = streamparse.Tools(TOOLS)
    first, again = StreamParser("hermes", tools), StreamParser("hermes", tools)
    assert again.options is first.options and first.options.tools is tools
    # Anything else is checked and made again: another format or forcing, another `Tools`, a list
    # (it could change between calls), an option.
    others = [StreamParser("mistral", tools), StreamParser("hermes", tools, True),
              StreamParser("hermes", streamparse.Tools(TOOLS)), StreamParser("hermes", TOOLS),
              StreamParser("hermes", tools, emit_calls="progressive")]
    made = [first.options, *(parser.options for parser in others)]
    assert len({id(options) for options in made}) == len(made)
    assert [(o.format, o.thinking_forced_open, o.emit_calls) for o in made[1:]] == [
        ("mistral", False, "validated"), ("hermes", True, "validated"), ("hermes", False, "validated"),
        ("hermes", False, "validated"), ("hermes", False, "progressive")]
    with pytest.raises(TypeError, match="thinking_forced_open must be a bool"):
        StreamParser("hermes", tools, 1)  # type: ignore[arg-type]

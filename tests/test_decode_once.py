"""A JSON call body is decoded once in `parse()`: the envelope scanner's skim reads a complete
top-level value strictly (`scanning.Decoded`) and the body kind's parse uses what it read, where the
body holds that very text, instead of decoding the text again (issue #12's speed target).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_strict_json import JSON_FORMATS, wire

import streamparse
from streamparse import Message, Token, ToolCall, grammar, json_reader, parse, strict_json
from streamparse.bodies import json_call
from streamparse.scanning import Decoded, JsonAwareScanner, whole_value

# Formats whose envelope scanner skims a complete JSON value with the C decoder (`JsonAwareScanner`,
# and Mistral's `json_reader.JsonValueScanner`).
SKIMMING = ["hermes", "granite", "nemotron", "command_r7b", "apertus", "llama3_json", "gpt_oss",
            "deepseek_r1", "deepseek_v3_1", "kimi_k2", "mistral", "cohere_command", "longcat", "gigachat3", "apriel",
            "hunyuan_a13b", "phi4_mini", "minimax_m1"]

# A large arguments object: most of what a decoder reads is this text.
ARGUMENTS = json.dumps({"rows": [{"id": i, "name": f"row {i}", "score": i / 7, "tags": ["a", "b"]}
                                 for i in range(300)], "note": "x" * 2000})


class _Counting:
    """Wraps the strict reader (`strict_json.decode_exact`, jiter) and the decoders' `raw_decode`, and
    sums how many characters each kind decoded: `read` (strictly, by jiter), `skimmed` (where a
    value ends: the C decoder, or `strict_json.value_end`'s lighter jiter pass)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *decoders: Any) -> None:
        self.read = self.skimmed = 0
        for decoder in decoders:
            monkeypatch.setattr(decoder, "raw_decode", self._wrap(decoder.raw_decode))
        read = strict_json.decode_exact

        def decode_exact(text: str, start: int, end: int, *flags: bool, **named: bool) -> Any:
            self.read += end - start  # a read that fails counts too: jiter went through the text
            return read(text, start, end, *flags, **named)
        monkeypatch.setattr(strict_json, "decode_exact", decode_exact)
        monkeypatch.setattr(json_call, "decode_exact", decode_exact)  # a call list's elements, one by one
        find_end = json_call.value_end

        def value_end(text: str, pos: int, end: int) -> int:
            found = find_end(text, pos, end)
            self.skimmed += found - pos
            return found
        monkeypatch.setattr(json_call, "value_end", value_end)

    @property
    def characters(self) -> int:
        return self.read + self.skimmed

    def _wrap(self, decode: Any) -> Any:
        def raw_decode(text: str, pos: int = 0) -> tuple[Any, int]:
            value, end = decode(text, pos)
            self.skimmed += end - pos
            return value, end
        return raw_decode


def test_the_skimming_formats_are_json_formats() -> None:
    assert set(SKIMMING) <= set(JSON_FORMATS)


@pytest.mark.parametrize("fmt", SKIMMING)
def test_parse_decodes_a_call_body_once(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = wire(fmt, ARGUMENTS)
    counted = _Counting(monkeypatch, grammar.DECODER, grammar.LENIENT_DECODER, json_reader.DECODER)
    message = parse(text, fmt)
    assert [call.arguments_json for call in message.tool_calls] == [ARGUMENTS], message.rejected
    # Each character of the arguments decoded once, plus the call object's other members.
    assert len(ARGUMENTS) <= counted.characters < len(ARGUMENTS) + 100


@pytest.mark.parametrize("fmt", ["granite", "nemotron", "command_r7b"])
def test_each_call_of_a_list_is_decoded_once(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each element is read strictly once (jiter), over the text it was guessed to be: no second pass.
    calls = [ToolCall(f"call{k}", f"f{k}", {"k": k, "text": "y" * 500}, "") for k in range(3)]
    text = streamparse.render(Message(tool_calls=calls), fmt)
    expected = parse(text, fmt, id_factory=lambda k: f"call{k}").tool_calls
    counted = _Counting(monkeypatch, grammar.DECODER, grammar.LENIENT_DECODER)
    assert parse(text, fmt, id_factory=lambda k: f"call{k}").tool_calls == expected
    assert [call.arguments["k"] for call in expected] == [0, 1, 2]
    sizes = [len(call.arguments_json) for call in expected]
    assert sum(sizes) < counted.read < len(text)  # the list's text, once
    assert counted.skimmed == 0


@pytest.mark.parametrize("fmt", ["granite", "nemotron"])
@pytest.mark.parametrize("arguments", [
    {"items": [{"name": "f1", "k": 1}, {"name": "f1", "k": 2}]},  # nested objects that look like the next call
    {"text": '}, {"name": "f1", "arguments": {}}'},  # and a string that does
])
def test_a_list_element_that_holds_the_next_one_s_opening_is_read_whole(
        fmt: str, arguments: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # A guess of where an element ends is proved by its strict read; a wrong one costs the lighter
    # pass per element, never a call's text.
    calls = [ToolCall("call0", "f0", arguments, json.dumps(arguments)), ToolCall("call1", "f1", {"k": 3}, '{"k": 3}')]
    text = streamparse.render(Message(tool_calls=calls), fmt)
    message = parse(text, fmt, id_factory=lambda k: f"call{k}")
    assert [(call.name, call.arguments) for call in message.tool_calls] == [("f0", arguments), ("f1", {"k": 3})]
    assert [json.loads(call.arguments_json) for call in message.tool_calls] == [arguments, {"k": 3}]
    assert not message.rejected


@pytest.mark.parametrize("separators", [[", ", ","], [",", ", "], ["\n,\n", ", "]])
def test_list_elements_written_with_other_spacing_are_each_read_once(
        separators: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The separator `json.dumps` writes is looked for first; where an earlier one is spaced another
    # way, the guess spans two elements, its strict read refuses it, and the list is read whole.
    calls = [{"name": f"f{k}", "arguments": {"k": k, "text": "y" * 300}} for k in range(3)]
    text = "<|tool_call|>[" + "".join(json.dumps(call) + separator for call, separator in zip(
        calls, [*separators, ""], strict=True)) + "]"
    counted = _Counting(monkeypatch, grammar.DECODER, grammar.LENIENT_DECODER, json_reader.DECODER)
    message = parse(text, "granite")
    assert [(call.name, call.arguments) for call in message.tool_calls] == [
        (call["name"], call["arguments"]) for call in calls]
    if separators[0] == ", ":  # each element guessed right: read once
        assert counted.read == sum(len(json.dumps(call)) for call in calls)


@pytest.mark.parametrize("fmt", ["granite", "nemotron"])
@pytest.mark.parametrize("bad", [0, 1, 2])
def test_a_list_element_with_a_number_too_large_for_a_double_breaks_the_list_there(fmt: str, bad: int) -> None:
    # The elements' numbers are checked once over the list's text, not per element: the calls
    # before the element are kept and the rest is one rejection, as for any element not strict.
    calls = [ToolCall(f"c{k}", f"f{k}", {"k": k, "text": "e1 " * 400}, "") for k in range(3)]
    text = streamparse.render(Message(tool_calls=calls), fmt)
    text = text.replace(f'"k": {bad},', '"k": 1e999,')
    message = parse(text, fmt)
    assert [call.name for call in message.tool_calls] == [f"f{k}" for k in range(bad)]
    assert [(r.status, r.errors[0][:4]) for r in message.rejected] == [("invalid_json", f"$[{bad}]")]
    assert "too large for a double" in message.rejected[0].errors[0]


@pytest.mark.parametrize("fmt", ["granite", "nemotron"])
def test_list_elements_that_open_with_other_keys_are_each_read(fmt: str) -> None:
    text = streamparse.render(Message(tool_calls=[ToolCall("c", "f0", {"a": 1}, '{"a": 1}')]), fmt)
    element = '{"name": "f0", "arguments": {"a": 1}}'
    swapped = '{"arguments": {"b": [2]}, "name": "f1"}'
    assert element in text
    message = parse(text.replace(element, f"{element}, {swapped},{element}"), fmt)
    assert [(call.name, call.arguments_json) for call in message.tool_calls] == [
        ("f0", '{"a": 1}'), ("f1", '{"b": [2]}'), ("f0", '{"a": 1}')]


_GIGACHAT_OPENERS = ("<|function_call|>", "<|message_sep|>\n\nfunction call<|role_sep|>\n")


@pytest.mark.parametrize(("fmt", "key", "before", "between", "after"), [
    *(("llama3_json", "parameters", "", separator, "") for separator in ("", "; ", "\n")),
    *(("gigachat3", "arguments", "Calling.\n" + opener, opener, "<|message_sep|>") for opener in _GIGACHAT_OPENERS),
])
def test_each_call_object_that_ends_at_its_value_is_decoded_once(
        fmt: str, key: str, before: str, between: str, after: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # An object followed by the next is read up to where that one opens (Llama 3's bare objects) or
    # up to the next call's opener (GigaChat's `JsonCall.ends_before`), proved by the read: not read
    # up to the end of the output, refused there, and read again up to where jiter said it ended.
    calls = [{"name": f"f{k}", key: {"k": k, "text": "y" * 500}} for k in range(3)]
    text = before + between.join(json.dumps(call) for call in calls) + after
    counted = _Counting(monkeypatch, grammar.DECODER, grammar.LENIENT_DECODER)
    message = parse(text, fmt)
    assert [(call.name, call.arguments) for call in message.tool_calls] == [
        (call["name"], call[key]) for call in calls]
    assert counted.read == sum(len(json.dumps(call)) for call in calls)
    assert counted.skimmed == 0


def test_a_gigachat_call_that_holds_the_next_opener_in_a_string_is_read_whole() -> None:
    # The guess (the value ends before the next opener) is wrong here; the value is read all the same.
    calls = [{"name": "f0", "arguments": {"text": "see <|function_call|>{} and <|message_sep|>}"}},
             {"name": "f1", "arguments": {}}]
    text = "".join("<|function_call|>" + json.dumps(call) for call in calls)
    message = parse(text, "gigachat3")
    assert [(call.name, call.arguments) for call in message.tool_calls] == [
        (call["name"], call["arguments"]) for call in calls]
    assert not message.rejected and message.content == ""


def test_each_call_of_a_mistral_nemo_list_is_decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [{"name": f"f{k}", "arguments": {"k": k, "text": "y" * 500}, "id": f"id{k}"} for k in range(3)]
    text = "[TOOL_CALLS]" + json.dumps(calls)
    counted = _Counting(monkeypatch, grammar.DECODER, grammar.LENIENT_DECODER, json_reader.DECODER)
    message = parse(text, "mistral")
    assert [(call.name, call.id, call.arguments) for call in message.tool_calls] == [
        (call["name"], call["id"], call["arguments"]) for call in calls]
    assert counted.read <= len(text) - len("[TOOL_CALLS]")  # the list's text, once
    assert counted.skimmed < len(json.dumps(calls[:-1]))


@pytest.mark.parametrize("fmt", SKIMMING)
def test_a_value_that_is_not_strict_is_decoded_again_for_its_error(fmt: str) -> None:
    # The skim's strict read fails: it finds only where the value ends, and the parse says why.
    message = parse(wire(fmt, '{"a": [1, {"k": 1, "k": 2}]}'), fmt)
    assert not message.tool_calls
    assert [call.status for call in message.rejected] == ["invalid_json"]
    assert "duplicate key 'k'" in " ".join(message.rejected[0].errors)


def test_what_was_decoded_is_used_only_for_the_very_same_text() -> None:
    text = 'xx{"a": [1, 2]}yy'
    scanner = JsonAwareScanner((), end_at_value=True, read=whole_value)
    assert scanner.scan(text, 0).end == 15
    decoded = scanner.decoded
    assert decoded == Decoded(text, 2, 15, {0: ({"a": [1, 2]}, 13)})
    assert decoded.at(' {"a": [1, 2]}', 1) == {0: ({"a": [1, 2]}, 13)}
    assert decoded.at(' {"a": [1, 3]}', 1) is None  # one character differs
    assert decoded.at(' {"a": [1, 2]', 1) is None  # cut short
    assert decoded.at('{"a": [1, 2]}', 1) is None  # elsewhere


def test_a_scanner_without_a_reader_decodes_nothing_it_keeps() -> None:
    scanner = JsonAwareScanner((), end_at_value=True)
    assert scanner.scan('{"a": 1}', 0).end == 8
    assert scanner.decoded is None


def test_a_body_cut_by_max_call_chars_is_not_the_value_skimmed() -> None:
    # The skim read the whole object; the body keeps its first 20 characters only, which are no call.
    message = parse('<tool_call>{"name": "f", "arguments": {"a": 1}}', "hermes", max_call_chars=20)
    assert [call.status for call in message.rejected] == ["truncated"]


def test_token_aware_look_alikes_inside_a_skimmed_value_are_the_body_text() -> None:
    # The scanner sees the look-alike blanked (NULs, which no JSON string holds); the call keeps it.
    call = '{"name": "f", "arguments": {"x": "</tool_call>"}}'
    tokens = [Token("<tool_call>", True), Token(call), Token("</tool_call>", True)]
    message = parse(tokens, "hermes", special_tokens="require")
    assert [call.arguments for call in message.tool_calls] == [{"x": "</tool_call>"}]

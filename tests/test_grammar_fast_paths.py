"""The readers that skip the parse tree (`tagged_params._read_call`, `header_json._BodyReader._read`)
read a body exactly as their grammar does, or decline (None) and leave it to the grammar.

Bodies are the calls of each format's fixtures, cut and mutated at drawn places."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FIXTURES
from hypothesis import given
from hypothesis import strategies as st
from parsimonious.exceptions import ParseError

import streamparse
from streamparse.bodies import header_json, tagged_params
from streamparse.grammar import load_grammar
from streamparse.registry import get_format

_TAGGED = ["qwen3_coder", "deepseek_v3_2", "glm45", "minimax_m2", "seed_oss",
           "hy_v3", "mimo_v2", "solar_open2", "step3", "deepseek_v4_1", "gigachat3_5",
           "hy_v4", "iquest_q1", "ling3", "minicpm5"]
_HEADED = ["deepseek_r1", "deepseek_v3_1", "kimi_k2"]
_INSERTS = ["\n", " ", "<", ">", "{", "}", '"', "=", "a", "</"]


def _bodies(fmt: str, kind: type) -> tuple[Any, list[str]]:
    """The format's body kind of type `kind`, and the bodies of its fixtures' calls."""
    envelope = next(e for e in get_format(fmt).envelopes if isinstance(e.body, kind))
    body_kind = envelope.body
    closers = (body_kind.call_close,) if kind is tagged_params.TaggedParams else body_kind.closers
    bodies = []
    for path in sorted((FIXTURES / fmt).glob("*.txt")):
        for call in streamparse.parse(path.read_text(encoding="utf-8"), fmt).tool_calls:
            for opener in envelope.openers:  # the envelope's body: after its opener, before its closer
                at = call.raw.find(opener)
                if at >= 0:
                    body = call.raw[at + len(opener):]
                    ends = [body.find(closer) for closer in closers if closer in body]
                    bodies.append(body[:min(ends)] if ends else body)
                    break
    assert bodies, f"{fmt}: its fixtures hold calls"
    return body_kind, bodies


def _mutated(data: st.DataObject, bodies: list[str]) -> str:
    body = data.draw(st.sampled_from(bodies))
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, len(body)))
        change = data.draw(st.sampled_from(["cut", "drop", "insert"]))
        if change == "cut":
            body = body[:at]
        elif change == "drop":
            body = body[:at] + body[at + 1:]
        else:
            body = body[:at] + data.draw(st.sampled_from(_INSERTS)) + body[at:]
    return body


def _tree(grammar: str, body: str, visitor: Any) -> Any:
    try:
        return visitor.visit(load_grammar(grammar).parse(body))
    except ParseError:
        return None


@pytest.mark.parametrize("fmt", _TAGGED)
@given(data=st.data())
def test_tagged_params_read_without_a_tree_as_the_grammar_does(fmt: str, data: st.DataObject) -> None:
    kind, bodies = _bodies(fmt, tagged_params.TaggedParams)
    body = _mutated(data, bodies)
    fast = tagged_params._read_call(kind.grammar, body)
    if fast is None:
        return  # declined: the grammar reads it
    tree = _tree(kind.grammar, body, tagged_params._VISITOR)
    assert tree is not None, body
    (head, params), (tree_head, tree_params) = fast, tree
    assert head.group(0) == tree_head.group(0)
    assert [(m.group(0), raw, closed) for m, raw, closed in params] == \
           [(m.group(0), raw, closed) for m, raw, closed in tree_params]


@pytest.mark.parametrize("fmt", _HEADED)
@given(data=st.data())
def test_header_json_reads_without_a_tree_as_the_grammar_does(fmt: str, data: st.DataObject) -> None:
    kind, bodies = _bodies(fmt, header_json.HeaderJson)
    body = _mutated(data, bodies)
    reader = header_json._BodyReader(kind.grammar, kind.shape)
    fast = reader._read(body)
    if fast is None:
        return
    tree = _tree(kind.grammar, body, header_json._VISITOR)
    assert tree is not None, body
    assert fast[0] == tree[0] and fast[1].text == tree[1].text

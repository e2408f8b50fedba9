"""`grammar_ir.ordered_members`: a tool's optional arguments in order, one `Members` node of n members,
written in O(n) by GBNF and Lark (a rule per suffix) and in a structural tag (O(n log n) expanded while
few, then a `grammar` format of their GBNF) (issue 39).

Before, the members from each i on were written out whole once per i: O(n²) nodes. For `llama3_json`
and `pythonic` under a forcing `tool_choice`, 500 -> 1,000 properties in one tool took 0.42 -> 1.72 s
and 0.50 -> 2.52 s to build (hermes: 0.02 s), and 1,000 optional ones ended in a `RecursionError`
(the options nested one inside the next, 1,000 deep). These tests count what is built, not time, and
check with the engines that each written form takes exactly the member lists it should.
"""

from __future__ import annotations

import importlib
import itertools
import math
import re
from typing import Any

import pytest

import streamparse
from streamparse.bodies.argument_layout import in_order
from streamparse.constrain import grammar_for
from streamparse.constrain.gbnf import gbnf
from streamparse.constrain.lark import lark
from streamparse.grammar_ir import Alt, Lit, Members, Node, Regex, Repeat, Seq, ordered_members

grammar_engines = pytest.importorskip("grammar_engines")
# the module (the package names its function `structural_tag` too)
structural_tag = importlib.import_module("streamparse.constrain.structural_tag")


def language(node: Node) -> set[str]:
    """Every text the node matches (literals, sequences, alternatives and optional items only)."""
    if isinstance(node, Lit):
        return {node.text}
    if isinstance(node, Seq):
        texts = {""}
        for item in node.items:
            texts = {before + after for before in texts for after in language(item)}
        return texts
    if isinstance(node, Alt):
        return set().union(*(language(option) for option in node.options))
    if isinstance(node, Members):
        return language(node.expanded())
    assert isinstance(node, Repeat) and (node.min, node.max, node.separator) == (0, 1, None), node
    return {""} | language(node.item)


def expected(flags: tuple[bool, ...], separator: str, at_least_one: bool) -> set[str]:
    """By definition: every choice of members holding the required ones, in order, joined."""
    names = [chr(ord("a") + i) for i in range(len(flags))]
    found = set()
    for chosen in itertools.product([False, True], repeat=len(flags)):
        if all(taken or not required for taken, required in zip(chosen, flags, strict=True)) \
                and (any(chosen) or not at_least_one):
            found.add(separator.join(name for name, taken in zip(names, chosen, strict=True) if taken))
    return found


@pytest.mark.parametrize("size", range(8))
def test_the_members_written_are_exactly_the_choices_that_hold_the_required_ones(size: int) -> None:
    for flags in itertools.product([False, True], repeat=size):
        members = [(Lit(chr(ord("a") + i)), required) for i, required in enumerate(flags)]
        assert language(ordered_members(members, Lit(","))) == expected(flags, ",", False)
        assert language(in_order(members, Lit(","))) == expected(flags, ",", False)
        assert language(in_order(members)) == expected(flags, "", False)
        if size:
            assert language(in_order(members, Lit(","), at_least_one=True)) == expected(flags, ",", True)
            assert language(in_order(members, at_least_one=True)) == expected(flags, "", True)


def near_misses(size: int) -> set[str]:
    """Member lists a grammar of `size` members must refuse unless they are in its language: every
    order of every choice of members, and separators doubled, leading or trailing."""
    names = [chr(ord("a") + i) for i in range(size)]
    texts = {",".join(order) for count in range(size + 1) for order in itertools.permutations(names, count)}
    doubled = {text.replace(",", ",,") for text in texts}
    return texts | doubled | {f",{text}" for text in texts} | {f"{text}," for text in texts}


def written_forms(node: Node) -> dict[str, Any]:
    """`node` as each syntax writes it, and the structural tag both ways (expanded and as a grammar)."""
    forms: dict[str, Any] = {"gbnf": gbnf(node), "lark": lark(node)}
    for limit in (0, 1_000):
        structural_tag.EXPANDED_MEMBERS, saved = limit, structural_tag.EXPANDED_MEMBERS
        try:
            forms[f"structural_tag({limit})"] = structural_tag.structural_tag(node)
        finally:
            structural_tag.EXPANDED_MEMBERS = saved
    return forms


def accepts(syntax: str, grammar: Any, text: str) -> bool:
    if syntax == "gbnf":
        return grammar_engines.gbnf_accepts(grammar, text)
    if syntax == "lark":
        return grammar_engines.lark_accepts(grammar, text, ())
    return grammar_engines.structural_tag_accepts(grammar, text)


@pytest.mark.parametrize("size", range(2, 4))
def test_each_syntax_writes_exactly_the_member_lists_that_hold_the_required_ones(size: int) -> None:
    for flags in itertools.product([False, True], repeat=size):
        for at_least_one in (False, True):
            members = [(Lit(chr(ord("a") + i)), required) for i, required in enumerate(flags)]
            node = ordered_members(members, Lit(","), at_least_one=at_least_one)
            assert isinstance(node, Members)
            allowed = expected(flags, ",", at_least_one)
            for syntax, grammar in written_forms(node).items():
                taken = {text for text in near_misses(size) if accepts(syntax, grammar, text)}
                assert taken == allowed, (syntax, flags, at_least_one)


def test_a_structural_tag_writes_many_members_as_one_grammar_format_and_few_expanded() -> None:
    few = ordered_members([(Regex(f"m{i}"), False) for i in range(8)], Lit(","))
    many = ordered_members([(Regex(f"m{i}"), False) for i in range(1000)], Lit(","))
    assert "grammar" not in str(structural_tag.structural_tag(few))
    tag = structural_tag.structural_tag(many)
    assert tag["format"]["type"] == "grammar" and len(tag["format"]["grammar"]) < 200_000
    assert grammar_engines.structural_tag_accepts(tag, "m3,m500,m999")
    assert not grammar_engines.structural_tag_accepts(tag, "m500,m3")


def rules_and_depth(node: Node) -> tuple[int, int]:
    """How many member occurrences a syntax writes (GBNF's rules referring to a member), and how deep
    the node nests."""
    count, deepest = 0, 0
    stack: list[tuple[Any, int]] = [(node, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, Regex):
            count += 1
        elif isinstance(item, Seq):
            stack.extend((child, depth + 1) for child in item.items)
        elif isinstance(item, Alt):
            stack.extend((child, depth + 1) for child in item.options)
        elif isinstance(item, Repeat):
            stack.append((item.item, depth + 1))
        elif isinstance(item, Members):
            stack.extend((child, depth + 1) for child, _ in item.members)
    return count, deepest


@pytest.mark.parametrize("every", [0, 2, 1000])  # required: none, every other member, one in 1,000
@pytest.mark.parametrize("size", [1000, 4000])
def test_the_node_and_its_grammars_grow_linearly_and_the_expanded_form_as_n_log_n(size: int, every: int) -> None:
    """n members are one node of n children, GBNF and Lark write O(1) per member (a rule for each
    suffix: 2n rules, each member written once), and the expanded tree (a structural tag of few
    members) holds at most n(log2 n + 2) member copies, O(log n) deep, not the n(n+1)/2 copies and
    n levels of before."""
    members: list[tuple[Node, bool]] = [(Regex(f"m{i}"), every > 0 and i % every == every - 1)
                                         for i in range(size)]
    node = ordered_members(members, Lit(","))
    assert rules_and_depth(node) == (size, 2)
    for text in (gbnf(node), lark(node)):
        assert len(re.findall(r"\bm\d+\b", text)) == size
        assert len(text) < 120 * size
    count, depth = rules_and_depth(node.expanded()) if isinstance(node, Members) else (0, 0)
    assert count <= size * (math.log2(size) + 2)
    assert depth <= 4 * math.log2(size) + 8


@pytest.mark.parametrize("fmt", ["pythonic", "llama3_json"])
def test_a_tool_of_a_thousand_optional_properties_has_a_grammar(fmt: str) -> None:
    """It was a `RecursionError` (the quadratic tree, 1,000 options deep)."""
    tools = streamparse.Tools([{"name": "f", "parameters": {"type": "object", "properties": {
        f"p{i}": {"type": "string"} for i in range(1000)}}}])
    for syntax in ("gbnf", "lark"):
        grammar = grammar_for(fmt, tools, tool_choice="required", syntax=syntax)
        assert isinstance(grammar, str) and "p999=" in grammar and len(grammar) < 2_000_000

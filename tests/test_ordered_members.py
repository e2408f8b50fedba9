"""`grammar_ir.ordered_members`: a tool's optional arguments in order, in O(n log n) nodes (issue 39).

Before, the members from each i on were written out whole once per i: O(n²) nodes. For `llama3_json`
and `pythonic` under a forcing `tool_choice`, 500 -> 1,000 properties in one tool took 0.42 -> 1.72 s
and 0.50 -> 2.52 s to build (hermes: 0.02 s), and 1,000 optional ones ended in a `RecursionError`
(the options nested one inside the next, 1,000 deep). These tests count what is built, not time.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

import streamparse
from streamparse.bodies.argument_layout import in_order
from streamparse.constrain import grammar_for
from streamparse.grammar_ir import Alt, Lit, Node, Regex, Repeat, Seq, ordered_members


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


def occurrences_and_depth(node: Node) -> tuple[int, int]:
    """How many members (the patterns) the tree holds, and how deep it nests."""
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
    return count, deepest


@pytest.mark.parametrize("every", [0, 2, 1000])  # required: none, every other member, one in 1,000
@pytest.mark.parametrize("size", [1000, 4000])
def test_the_tree_grows_as_n_log_n_and_nests_as_log_n(size: int, every: int) -> None:
    """1,000 optional members: 6,044 member copies, not the 500,500 of n(n+1)/2, 23 levels deep, not
    2,000."""
    members: list[tuple[Node, bool]] = [(Regex(f"m{i}"), every > 0 and i % every == every - 1)
                                         for i in range(size)]
    count, depth = occurrences_and_depth(ordered_members(members, Lit(",")))
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

"""The IR as a llama.cpp GBNF grammar (the `grammar` field of llama.cpp server's requests,
`LlamaGrammar.from_string` in llama-cpp-python).

GBNF has strings, character classes, rule references, groups, `|` and the quantifiers `* + ? {m,n}`,
and nothing else, so three nodes are translated here:
- `Text(stops)`: one rule per state of the automaton that tracks how much of a stop the text ends
  with (the states are the stops' proper prefixes): each character moves to the next state, a
  character that would complete a stop has no move, and the text may end in any state;
- `Regex`: the portable subset (`grammar_ir`), read with Python's own regex parser;
- `Json(schema)`: rules for the JSON Schema subset that llama.cpp's converter handles (`json_gbnf`),
  its whitespace spaces only where `one_line`.
`Special` is its text: llama.cpp matches a preserved token (`preserved_tokens`) by its text.
"""

from __future__ import annotations

from ..grammar_ir import Json, Lit, Node, Regex, Special, Text
from .json_gbnf import JsonRules
from .terms import ExpressionWriter, RuleSet, char_class, literal, regex_rule, too_deep


class _Writer(ExpressionWriter):
    def __init__(self) -> None:
        self.rules = RuleSet()
        self.json = JsonRules(self.rules)
        self.json_line = JsonRules(self.rules, one_line=True)

    def choice(self, options: str) -> str:
        return self.rules.name("alt", options)

    def leaf(self, node: Node) -> str:
        if isinstance(node, (Lit, Special)):
            return literal(node.text)
        if isinstance(node, Json):
            return (self.json_line if node.one_line else self.json).value(node.schema)
        if isinstance(node, Text):
            return self._text(node.stops)
        if isinstance(node, Regex):
            return self.rules.name("pattern", regex_rule(node.pattern))
        raise TypeError(f"not a grammar IR node: {node!r}")

    def _text(self, stops: tuple[str, ...]) -> str:
        """Text holding none of `stops`: a rule per proper prefix of a stop the text may end with.
        Cost: one rule per prefix, each with one alternative per next state."""
        stops = tuple(stop for stop in stops if stop)
        if not stops:
            return self.rules.name("text", "[^\\x00]*")
        key = "\x00".join(stops)
        found = self.rules.known(("text", key))
        if found is not None:
            return found
        prefixes = sorted({stop[:i] for stop in stops for i in range(len(stop))}, key=lambda p: (len(p), p))
        alphabet = sorted({char for stop in stops for char in stop})
        names = {prefix: self.rules.reserve(f"text-{position}") for position, prefix in enumerate(prefixes)}
        self.rules.remember(("text", key), names[""])
        for prefix in prefixes:
            moves: dict[str, list[str]] = {}
            for char in alphabet:
                after = prefix + char
                if any(after.endswith(stop) for stop in stops):
                    continue  # this character would complete a stop
                state = next(after[i:] for i in range(len(after) + 1) if after[i:] in names)
                moves.setdefault(state, []).append(char)
            options = [f"{char_class(chars)} {names[state]}" for state, chars in moves.items()]
            options.append(f"{char_class(alphabet, negated=True)} {names['']}")
            self.rules.define(names[prefix], "(" + " | ".join(options) + ")?")
        return names[""]


def gbnf(node: Node) -> str:
    """The GBNF grammar whose `root` rule is `node`."""
    writer = _Writer()
    try:
        root = writer.expression(node)
    except RecursionError:
        raise too_deep("GBNF") from None
    return writer.rules.text(root)

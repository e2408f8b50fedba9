"""Hypothesis strategies for property-testing a pipeline against streamparse's final parse.

    from hypothesis import given
    from streamparse.testing import messages, splittings

    @given(data=st.data())
    def test_my_server(data):
        message = data.draw(messages("hermes"))
        text = streamparse.render(message, "hermes")
        chunks = data.draw(splittings(text))
        ...  # feed `chunks` through your pipeline; compare with streamparse.parse(text)

Needs the `test` extra (`pip install 'streamparse[test]'`).
"""

from __future__ import annotations

from typing import Any

try:
    from hypothesis import strategies as st
except ImportError as error:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "streamparse.testing needs hypothesis: install the test extra, pip install 'streamparse[test]'"
    ) from error

import itertools

import regex  # type: ignore[import-untyped]

from .registry import get_format
from .types import Message, ToolCall

__all__ = ["arguments", "messages", "risky_argument_texts", "risky_schemas", "splittings", "text_for"]

# Characters that exercise escaping and tag handling; the formats' delimiters are filtered out.
_TRICKY = "<>/[]{}\"'\\|`=:_-  \t\n"
_ALPHABET = st.one_of(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
    st.sampled_from([*list(_TRICKY), "é", "李", "🚀", "\xa0", "｜", "▁"]),
)
_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)


def _clean(forbidden: tuple[str, ...]) -> Any:
    return lambda text: not any(word in text for word in forbidden)


def _no_anchored_call(format: str) -> Any:
    """Text in which none of the format's anchors (`FormatSpec.anchors`) would open a call: a Llama 3
    call object at its start, a pythonic `[NAME(` anywhere."""
    anchors = [(regex.compile(a.lead), a) for a in get_format(format).anchors]

    def ok(text: str) -> bool:
        for lead, anchor in anchors:
            if anchor.at_start and lead.match(text):
                return False
            if anchor.trigger and any(lead.match(text, i) for i, c in enumerate(text) if c == anchor.trigger):
                return False
        return True

    return ok


def text_for(format: str, min_size: int = 0, max_size: int = 80) -> st.SearchStrategy[str]:
    """Free text for content or reasoning: no delimiter of the format inside, no outer whitespace,
    nothing the format would read as a call by its position and pattern."""
    spec = get_format(format)
    forbidden = (*spec.delimiters, *spec.reserved)
    text = st.text(_ALPHABET, min_size=min_size, max_size=max_size).map(str.strip).filter(_clean(forbidden))
    if spec.marker_suffix is not None and spec.marker_suffix.learned:  # no marker of another spelling either
        learned = regex.compile(spec.marker_suffix.learned)
        text = text.filter(lambda found: learned.search(found) is None)
    return text.filter(_no_anchored_call(format)) if spec.anchors else text


# Pieces of code: indentation, blank lines and trailing newlines, comparisons and markup.
_CODE = [
    "\n", "\n\n", "\r\n", "    ", "\t", "\n    ", "\\", '"', "<", "</", "< ", ">", "a < b", "<b>", "</b>",
    "def f(x):\n    return x\n", "if a<b:\n\tpass\n", "x = '<'\n", "# </\n", "    \n",
]


# Closers a format's scanner finds wherever they stand, inside a string too, as the reference parser
# does (FORMATS.md: OLMo 3's `</function_calls>` ends the block): a value cannot hold them whole.
_CLOSE_ANYWHERE = {"olmo3": ("</function_calls>",)}


def _string_values(format: str) -> st.SearchStrategy[str]:
    """Code-like strings with delimiters (or, where a format cannot escape them, near-misses) inside."""
    spec = get_format(format)
    forbidden = spec.reserved if not spec.untyped_values else (*spec.delimiters, *spec.reserved)
    forbidden = (*forbidden, *_CLOSE_ANYWHERE.get(format, ()))
    tags = [*spec.delimiters, *spec.reserved]
    near_misses = [tag[:-1] for tag in tags] + [tag[:-1] + " " + tag[-1] for tag in tags] + [tag[1:] for tag in tags]
    fragments = st.one_of(
        st.text(_ALPHABET, max_size=12),
        st.sampled_from(tags + near_misses + _CODE),
    )
    return st.lists(fragments, max_size=5).map("".join).filter(_clean(forbidden))


def arguments(format: str) -> st.SearchStrategy[dict[str, Any]]:
    """Call arguments the format can carry: JSON values, or strings where the format is untyped."""
    strings = _string_values(format)
    if get_format(format).untyped_values:
        return st.dictionaries(_NAMES, strings, max_size=4)
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-(10**20), 10**20),
        st.floats(allow_nan=False, allow_infinity=False), strings,
    )
    values = st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(strings, inner, max_size=3)),
        max_leaves=8,
    )
    return st.dictionaries(_NAMES, values, max_size=4)


@st.composite
def messages(draw: Any, format: str = "hermes", max_calls: int = 3) -> Message:
    """Messages that `render(message, format)` writes and `parse` reads back to the same message
    (ids aside: compare with your own `id_factory`, or ignore them)."""
    spec = get_format(format)
    reasoning = draw(text_for(format)) if spec.reasoning else ""
    content = draw(text_for(format))
    calls = []
    for position in range(draw(st.integers(0, max_calls))):
        args = draw(arguments(format))
        calls.append(ToolCall(f"id{position}", draw(_NAMES), args, ""))
    return Message(content=content, reasoning=reasoning, tool_calls=calls)


@st.composite
def splittings(draw: Any, text: str, max_chunk: int = 12) -> list[str]:
    """`text` cut into chunks: single characters, splits inside delimiters, large pieces."""
    if not text:
        return []
    style = draw(st.sampled_from(("chars", "random", "few")))
    if style == "chars":
        return list(text)
    cuts: set[int] = set()
    if style == "random":
        pos = 0
        while pos < len(text):
            pos += draw(st.integers(1, max_chunk))
            cuts.add(min(pos, len(text)))
    else:
        cuts = set(draw(st.lists(st.integers(0, len(text)), max_size=4)))
    edges = sorted({0, len(text), *cuts})
    return [text[a:b] for a, b in itertools.pairwise(edges) if b > a]


# The schema keywords that used to raise or stall inside validation (issue #12), and argument
# values that JSON readers disagree on or that validators choke on.
_RISKY_PATTERNS = ("^(a|a)*$", "^(a+)+$", "^[a-z]{1,8}$", "(x+x+)+y", "^$", "a{2,}")


def risky_schemas() -> st.SearchStrategy[dict[str, Any]]:
    """Tool parameter schemas drawing the risky keywords: `multipleOf` with a fraction, `format:
    regex`, `uniqueItems`, backtracking `pattern`/`patternProperties`/`propertyNames`, local
    `$ref`s, `oneOf`/`anyOf` at the top of the parameters, nullable types."""
    value = st.sampled_from([
        {"type": "number", "multipleOf": 0.01}, {"type": "integer", "multipleOf": 3},
        {"type": "string", "format": "regex"}, {"type": "array", "uniqueItems": True},
        {"type": "string", "nullable": True}, {"type": ["integer", "null"]}, {"$ref": "#/$defs/thing"},
        {"anyOf": [{"type": "object"}, {"type": "null"}]}, {},
    ]) | st.sampled_from(_RISKY_PATTERNS).map(lambda p: {"type": "string", "pattern": p})
    properties = st.dictionaries(st.sampled_from(["a", "b", "path", "n"]), value, max_size=4)
    extras = st.sampled_from([
        {}, {"additionalProperties": False},
        {"patternProperties": {"^(a|a)*$": {"type": "string"}}},
        {"propertyNames": {"pattern": "^(a+)+$"}},
    ])

    def build(props: dict[str, Any], extra: dict[str, Any], split: bool) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "$defs": {"thing": {"type": ["object", "array"]}}, **extra}
        if split and len(props) > 1:
            keys = sorted(props)
            schema["anyOf"] = [{"properties": {key: props[key]}} for key in keys]
        else:
            schema["properties"] = props
        return schema

    return st.builds(build, properties, extras, st.booleans())


def risky_argument_texts() -> st.SearchStrategy[str]:
    """JSON texts of arguments with the values that are not strict JSON or that strain a validator:
    NaN, Infinity, numbers overflowing a double, 400-digit integers, lone surrogates (escaped and raw),
    duplicate keys, long repeated items, deep nesting, huge regex repeats."""
    atoms = st.sampled_from([
        "NaN", "-Infinity", "1e999", "9" * 400, "1.005", "0.01", '"\\ud800"', '"\\udc00x"', '"\ud800"',
        '"\\ud83d\\ude00"', '"a{4294967296}"', '"' + "a" * 40 + '!"', "true", "null", "[1, 1.0]",
        "[1, true]", '[{"k": 1}, {"k": 1}]', '{"k": 1, "k": 2}', "[" * 300 + "]" * 300, '"ok"', "3",
    ])
    keys = st.sampled_from(['"a"', '"b"', '"path"', '"n"', '"\\ud800"', '"' + "a" * 40 + '!"'])
    members = st.lists(st.tuples(keys, atoms), max_size=4)
    return members.map(lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}")

"""DSML-dialect text for the tests of deepseek_v4_1 and gigachat3_5, built from each declaration's
tags (`families.deepseek_dsml.Dialect`), and a drawn call block for their any-chunking properties."""

from __future__ import annotations

from hypothesis import strategies as st

from streamparse.families.deepseek_dsml import Dialect


def param(dialect: Dialect, key: str, value: str, string: str | None = "true") -> str:
    attribute = f' string="{string}"' if string is not None else ""
    return f'{dialect.opener("parameter")} name="{key}"{attribute}>{value}{dialect.closer("parameter")}'


def invoke(dialect: Dialect, name: str, *params: str) -> str:
    """An invoke as the templates write it: parameters one per line, then the closer on its own line."""
    return f'{dialect.opener("invoke")} name="{name}">\n' + "".join(p + "\n" for p in params) + dialect.closer("invoke")


def block(dialect: Dialect, *invokes: str) -> str:
    """The calls block: invokes joined by a newline, the closer on its own line."""
    name = dialect.blocks[0]
    return f"{dialect.opener(name)}>\n" + "\n".join(invokes) + f"\n{dialect.closer(name)}"


# The tools and calls of the FORMATS.md wire blocks of both formats.
WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "location": {"type": "string"}, "days": {"type": "integer"}}, "required": ["location"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {
        "timezone": {"type": "string"}}}}}]
WIRE_CALLS = [("get_weather", {"location": "Paris, France", "days": 3}), ("get_time", {"timezone": "Europe/Paris"})]


def wire_block(dialect: Dialect) -> str:
    """The calls block of the FORMATS.md wire block: `WIRE_CALLS` as the dialect writes them."""
    return block(dialect, invoke(dialect, "get_weather", param(dialect, "location", "Paris, France"),
                                 param(dialect, "days", "3", "false")),
                 invoke(dialect, "get_time", param(dialect, "timezone", "Europe/Paris")))


def unclosed_at_the_end(dialect: Dialect) -> list[str]:
    """A complete call of `get_weather` (Oslo, 2 days) in a block, without the block's closer, and
    without the invoke's closer as well (fourth wave, Decision 1: both may be missing at the end)."""
    whole = block(dialect, invoke(dialect, "get_weather", param(dialect, "location", "Oslo"),
                                  param(dialect, "days", "2", "false")))
    cut = dialect.closer(dialect.blocks[0])
    return [whole.removesuffix(f"\n{cut}"), whole.removesuffix(f"\n{dialect.closer('invoke')}\n{cut}")]


def _values(dialect: Dialect) -> st.SearchStrategy[str]:
    """Values that are text, JSON, parts of the dialect's tags, and of the other dialects'."""
    tags = [dialect.opener("param"), dialect.closer("parameter")[:-1], "<｜DSML｜parameter>", "<｜GCML｜invoke"]
    return st.one_of(st.sampled_from(["5", "0.5", "true", "null", "[1]", '{"a": "</"}', "", "\n", "a < b",
                                      "<|message_sep|>", "</s>", "</think>", *tags]),
                     st.text(st.sampled_from(list("ab1 \n<>/=\"'\\{}[]｜é🚀\r")), max_size=10))


def drawn_block(data: st.DataObject, dialect: Dialect, keys: list[str], leads: list[str], ends: list[str]) -> str:
    """A lead, then a calls block with one invoke of `get_weather` whose parameters (from `keys`) have
    drawn values, typing attributes and closers (or none), closed or cut anywhere, then an end."""
    params = ""
    for key in data.draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)):
        string = data.draw(st.sampled_from(["true", "false", None]))
        closing = data.draw(st.sampled_from([dialect.closer("parameter") + "\n", dialect.closer("parameter"), ""]))
        params += param(dialect, key, data.draw(_values(dialect)), string).removesuffix(dialect.closer("parameter"))
        params += closing
    name = dialect.blocks[0]
    closer = data.draw(st.sampled_from([f"{dialect.closer('invoke')}\n{dialect.closer(name)}", dialect.closer(name),
                                        dialect.closer("invoke"), ""]))
    lead, end = data.draw(st.sampled_from(leads)), data.draw(st.sampled_from(ends))
    return f'{lead}{dialect.opener(name)}>\n{dialect.opener("invoke")} name="get_weather">\n{params}{closer}{end}'

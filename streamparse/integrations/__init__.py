"""Engine plugins: streamparse as vLLM's and SGLang's tool-call and reasoning parser.

Each module maps one engine's parser hooks onto `StreamParser.feed`/`close` and `grammar_for`,
imports its engine only when it is imported, and knows no format: the parser names are made from
`streamparse.formats()`. Importing `streamparse` imports none of them."""

from __future__ import annotations

PREFIX = "streamparse_"


def parser_names() -> dict[str, str]:
    """Every engine parser name (`streamparse_<format or alias>`) and the format name it reads."""
    from .. import formats

    return {PREFIX + name: name for name in formats()}

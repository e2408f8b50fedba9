"""Body kind `tagged_block`: a message body that is one block of `tagged_params` calls, each named by its
own call tag (Muse Glimmer's `<atem:function_calls>` holding `<atem:invoke name="N">` elements). The call's
name comes from the body: the message header only says that the body is a call.

The body ends at the message's terminators (`closers`) or the next message's opener (`stops`); it is
read when it ends, each call element by the `tagged_params` dialect `call` (its scanner finds where the
element ends: its closing tag outside a parameter value, or the block's closing tag), so every character
is looked at once more after the message's delimiter search. In progressive mode the calls are sent whole
when the message ends (no streamer): a block may hold several calls and a rejected element does not
take back the others.

Rules: whitespace around the block and between its elements is framing; the block's closing tag, and an
element's closing tag, may be missing where the message ends (a cut element is then `truncated` unless its
last value closed, `tagged_params`'s `end_tag_optional`). Text other than whitespace between the elements
is content (`BlockText`: text inside a wrapper). A body that is not one block (text before or after it),
and a block with no call element, are one `invalid_json` rejection with the message's raw text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..grammar_ir import Lit, seq
from ..grammar_ir import Node as GrammarNode
from ..scanning import TagScanner, WalkSource
from ..spec import BlockText, BodyResult, Envelope, Rejection
from ..types import INVALID_JSON, TRUNCATED
from ..validation import ToolSet
from .tagged_params import TaggedParams

_SPACE_RUN = re.compile(r"\s*")


@dataclass(frozen=True)
class TaggedBlock:
    """The `tagged_block` body kind: `block` = (opening tag, closing tag) around call elements, each
    opened by `call_open` and read by the dialect `call` (whose `wrapper_closers` holds the block's
    closing tag)."""

    block: tuple[str, str]
    call_open: str
    call: TaggedParams
    closers: tuple[str, ...]  # end the body, consumed (the message's terminators)
    stops: tuple[str, ...] = ()  # end the body, left for what follows (the next message's opener)
    tag: str = "the tool message"  # names the body in error messages
    # How the templates write the block around one call (for grammars): the text after the opening
    # tag and before `call_open`, and after the element's closing tag and before the block's.
    inner_lead: str = "\n"
    inner_trail: str = "\n"

    def scanner(self) -> TagScanner:
        return TagScanner(self.closers, self.stops)

    def streamer(self, tools: ToolSet, scanner: WalkSource) -> None:
        return None

    def parse(self, envelope: Envelope, tools: ToolSet) -> list[BodyResult]:
        body, complete = envelope.body, envelope.complete
        opening, closing = self.block
        pos = _SPACE_RUN.match(body).end()  # type: ignore[union-attr]
        if not body.startswith(opening, pos):
            if not complete and opening.startswith(body[pos:]):
                return [Rejection(TRUNCATED, [f"the output ended before the calls of {self.tag}"])]
            shown = body[pos: pos + 30]
            return [Rejection(INVALID_JSON, [f"{self.tag} must hold one {opening} block, not {shown!r}"])]
        pos += len(opening)
        results: list[BodyResult] = []
        closed = False
        while True:
            at = _SPACE_RUN.match(body, pos).end()  # type: ignore[union-attr]
            if body.startswith(self.call_open, at):
                element, pos = self._element(body, at + len(self.call_open))
                results += self.call.parse(element, tools)
                continue
            if body.startswith(closing, at):
                closed, pos = True, at + len(closing)
            elif at < len(body) and (complete or not _prefix_of_tag(body, at, (self.call_open, closing))):
                pos = _next_tag(body, at, (self.call_open, closing))  # text in the block, between calls: content
                results.append(BlockText(body[at:pos].rstrip()))
                continue
            elif at < len(body):  # the output ended inside a tag: the block's closer (optional), or a call
                if not closing.startswith(body[at:]):
                    results.append(Rejection(TRUNCATED, [f"the output ended inside {self.call.call_tag}"]))
                pos = len(body)
            break
        rest = _SPACE_RUN.match(body, pos).end()  # type: ignore[union-attr]
        if rest < len(body):
            shown = body[rest: rest + 30]
            return [Rejection(INVALID_JSON, [f"unexpected text after the {opening} block: {shown!r}"])]
        if not any(not isinstance(result, BlockText) for result in results):
            if not complete and not closed:
                return [Rejection(TRUNCATED, [f"the output ended inside the {opening} block of {self.tag}"])]
            return [Rejection(INVALID_JSON, [f"the {opening} block of {self.tag} holds no call"])]
        return results

    def _element(self, body: str, start: int) -> tuple[Envelope, int]:
        """The call element whose body starts at `start`, as an envelope of the dialect, and where
        what follows it starts. One ended by the block's closing tag lacks its own (tolerated); one that
        runs to the end of the message, terminated or not, is read as cut off: the dialect's
        `end_tag_optional` accepts it when its last value closed, else it is `truncated`."""
        found = self.call.scanner().scan(body, start)
        if found.end is None:  # the element runs to the end of the message
            return Envelope(self.call_open, body[start:], "", complete=False, wrapped=True), len(body)
        return Envelope(self.call_open, body[start: found.safe], body[found.safe: found.end], complete=True,
                        wrapped=True), found.end

    # ------------------------------------------------------------- the layout (grammar_ir.CallLayout)

    def call_grammar(self, name: str, parameters: Mapping[str, Any]) -> GrammarNode:
        """One call as the templates write it: the block, one call element, the block's end."""
        opening, closing = self.block
        return seq(Lit(opening + self.inner_lead + self.call_open), self.call.call_grammar(name, parameters),
                   Lit(self.call.call_close + self.inner_trail + closing))

    def body_grammar(self, calls: GrammarNode, many: bool) -> GrammarNode:
        """The body is the block: the message's terminator is the layout's."""
        return calls

    def calls_per_envelope(self) -> int | None:
        return 1


def _next_tag(body: str, at: int, tags: tuple[str, ...]) -> int:
    """Where the first of `tags` after `at` starts (the end of the body when none does): one search,
    so that many stray pieces of text cost one pass over the body."""
    found = _alternation(tags).search(body, at)
    return found.start() if found is not None else len(body)


@cache
def _alternation(tags: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, tags)))


def _prefix_of_tag(body: str, at: int, tags: tuple[str, ...]) -> bool:
    """Whether the body's end, from `at`, is the start of one of `tags` (cut off by the output's end)."""
    rest = body[at:]
    return any(tag.startswith(rest) for tag in tags)

"""Content and reasoning: the text emitted so far, whitespace whose role is not yet known, and
the deltas not yet handed out.

Cost: trailing whitespace waits in a list (with a running length), never rescanned, and is
joined once when later text shows it is inner; at the end it is framing and dropped. The list is
kept short (`hold_merged`), so a long run of whitespace costs about one byte a character,
whatever the chunking. Deltas of
the same kind are merged in place until `take()` hands them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..scanning import hold_merged
from ..types import Delta


@dataclass
class Region:
    """Content or reasoning: what was emitted, and whitespace waiting to learn its role."""

    kind: str
    parts: list[str] = field(default_factory=list)
    pending_ws: list[str] = field(default_factory=list)
    pending_length: int = 0  # len("".join(pending_ws)), kept as it changes
    deferred: bool = False  # its text is kept but not sent until `Output.release` (or handed over)

    @property
    def started(self) -> bool:
        return bool(self.parts)

    def hold(self, whitespace: str) -> None:
        """Keep `whitespace` until later text shows whether it is inner."""
        hold_merged(self.pending_ws, whitespace)
        self.pending_length += len(whitespace)

    def drop_pending(self) -> None:
        """The pending whitespace was framing (before a closer, at the end)."""
        self.pending_ws.clear()
        self.pending_length = 0


class Output:
    """The two text regions and the deltas for the caller."""

    __slots__ = ("content", "deltas", "reasoning", "sending")

    def __init__(self) -> None:
        self.content = Region("content")
        self.reasoning = Region("reasoning")
        self.deltas: list[Delta] = []
        # False where no one reads the deltas (`parse()` reads the message): none are made.
        self.sending = True

    def emit_text(self, region: Region, text: str) -> None:
        """Emit `text`, holding its trailing whitespace until later text shows it is inner."""
        if not text:
            return
        end = len(text.rstrip())
        if end:
            head = text[:end]
            if region.started or region.pending_ws:  # (held before any text: a trailing-framing marker)
                if region.pending_ws:
                    head = "".join(region.pending_ws) + head
                    region.drop_pending()
            else:
                head = head.lstrip()
            region.parts.append(head)
            if not region.deferred and self.sending:
                self.push(Delta(content=head) if region.kind == "content" else Delta(reasoning=head))
        if end < len(text) and (region.started or region.pending_ws):
            region.hold(text[end:])

    def release(self, region: Region) -> None:
        """A deferred region's text is what it is: send it, and what follows, as it comes."""
        if region.deferred:
            region.deferred = False
            if region.parts and self.sending:
                text = "".join(region.parts)
                self.push(Delta(content=text) if region.kind == "content" else Delta(reasoning=text))

    def hand_over(self, region: Region, to: Region) -> None:
        """A deferred region's text belongs to the other region after all (sent from there)."""
        text = "".join(region.parts) + "".join(region.pending_ws)  # its trailing whitespace waits on there
        region.parts.clear()
        region.drop_pending()
        region.deferred = False
        self.emit_text(to, text)

    def push(self, delta: Delta) -> None:
        """Append a delta, merging text with the previous delta of the same kind (not yet handed out)."""
        if not self.sending:
            return
        deltas = self.deltas
        if deltas and not delta.tool_calls:
            last = deltas[-1]
            if not last.tool_calls and bool(last.content) == bool(delta.content):
                last.content += delta.content
                last.reasoning += delta.reasoning
                return
        deltas.append(delta)

    def take(self) -> list[Delta]:
        """The deltas made since the last call."""
        out = self.deltas
        if out:
            self.deltas = []
            return out
        return []

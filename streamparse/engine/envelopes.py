"""The open wrapper and the open call envelope: the state the engine keeps while inside them.

Cost: an envelope body is kept as a list of pieces and joined once, when the envelope ends, for
its body kind; `max_call_chars` bounds what is kept, and what a wrapper buffers before its first
call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..scanning import Decoded, EnvelopeScanner
from ..spec import AnchorSpec, CallStreamer, EnvelopeSpec, WrapperSpec

# The parser's mode while an envelope is open (`parser.py`); here, so that the message readers
# (`messages.py`), which open call envelopes, name it without importing the parser at each call.
ENVELOPE_MODE = "envelope"


@dataclass
class OpenWrapper:
    """A wrapper (`<tool_call>` around `<function=…>`, DeepSeek's calls block) and what it holds so far."""

    spec: WrapperSpec
    return_mode: str  # the region it was opened in
    position: int  # where its opener starts in the output
    calls: int = 0
    raw: list[str] = field(default_factory=list)  # its text while it has no call yet (for a rejection)
    raw_length: int = 0
    ws: list[str] = field(default_factory=list)  # whitespace after its last call (`regions.hold_merged`)
    text_seen: bool = False  # `text_is_content`: the text since the last marker is not all whitespace

    @property
    def ws_length(self) -> int:
        return sum(map(len, self.ws))  # O(log n) pieces

    @property
    def holds_text(self) -> bool:
        """Whether what it kept before its first call is more than its opener and whitespace."""
        return any(piece.strip() for piece in self.raw[1:])


@dataclass
class OpenEnvelope:
    """A call envelope being read: its opener, the body so far, its scanner and (progressive) streamer."""

    spec: EnvelopeSpec
    opener: str
    scanner: EnvelopeScanner
    streamer: CallStreamer | None
    wrapped: bool  # opened inside a wrapper
    position: int  # where its opener starts in the output
    body: list[str] = field(default_factory=list)
    length: int = 0
    too_long: bool = False
    anchor: AnchorSpec | None = None  # opened by position and pattern (`engine/anchors.py`), not by a delimiter

    @property
    def decoded(self) -> Decoded | None:
        """What its scanner read in a JSON value it skimmed (`scanning.Decoded`), for the kind's parse."""
        return getattr(self.scanner, "decoded", None)

"""The one incremental engine, split by job (read `docs/architecture.md` first):

- `input.py`: bytes decoded incrementally as UTF-8; token-aware input (special tokens);
- `delimiters.py`: the delimiter sets each region searches, built once per format and options
  (the search itself and the hold-back of a possible delimiter prefix are `scanning.Delimiters`);
- `regions.py`: content and reasoning text, whitespace whose role is not yet known, the deltas;
- `envelopes.py`: the open wrapper and the open call envelope (body pieces, scanner, streamer);
- `settle.py`: what a finished envelope becomes: validation, ids, `on_rejected`, progressive deltas;
- `messages.py`: headed messages (`FormatSpec.messages`, harmony): the text outside messages, a
  header held until it ends and routed, a reasoning or content body;
- `reading.py`: what the readers of anchors and messages see of the parser (a Protocol below it);
- `parser.py`: `StreamParser`, which reads each region with the reader its mode names (`READERS`).

The engine takes a format declaration (`spec.FormatSpec`) and the checked `Options`; it imports
no adapter (`detect`, `openai`, `cli`) and knows no format by name.
"""

from __future__ import annotations

from .parser import StreamParser

__all__ = ["StreamParser"]

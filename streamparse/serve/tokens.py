"""A prompt's parts as token ids, with the model's own `tokenizer.json`, so that request text never
becomes a control token.

Added tokens (special or not: DeepSeek's `<｜User｜>` is a non-special added token) are matched only
inside template parts, by the model's tokenizer itself (its offsets say where). The text between
two template-owned added tokens — template and request
text together, so merges across a part boundary are the ones the model was trained on — is encoded
by a second tokenizer built from the same JSON with no added tokens. For a request whose text holds
no control token the ids are those of `tokenizer.encode(prompt, add_special_tokens=False)`; decoding
them gives the prompt. Needs the `server` extra (`tokenizers`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from ..gguf_metadata import is_gguf, tokenizer_json
from ..types import Token
from .marking import PromptPart

__all__ = ["PromptTokenizer"]


class PromptTokenizer:
    """The tokenizer of a model directory's `tokenizer.json` (or one built from a GGUF file's vocabulary,
    `streamparse.gguf_metadata.tokenizer_json`), encoding prompt parts safely."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from tokenizers import Tokenizer

        self.path = Path(path)
        text = tokenizer_json(self.path) if is_gguf(self.path) else self.path.read_text(encoding="utf-8")
        data = json.loads(text)
        self.tokenizer = Tokenizer.from_str(text)
        added = [token for token in data.get("added_tokens") or [] if token.get("content")]
        data["added_tokens"] = []
        self._plain = Tokenizer.from_str(json.dumps(data))
        self.added_ids = frozenset(int(token["id"]) for token in added)
        self.special_ids = frozenset(int(token["id"]) for token in added if token.get("special"))
        self.control_tokens = frozenset(str(token["content"]) for token in added)
        self._content = {int(token["id"]): str(token["content"]) for token in added}
        self.vocab_size = int(self.tokenizer.get_vocab_size(with_added_tokens=True))

    def _text_ids(self, text: str) -> list[int]:
        if not text:
            return []
        ids = list(self._plain.encode(text, add_special_tokens=False).ids)
        leaked = self.added_ids.intersection(ids)
        if leaked:  # the base vocabulary reaches a control token by merges: never send it
            raise ValueError(f"{self.path}: ordinary text {text[:80]!r} encodes to the control token id(s) "
                             f"{sorted(leaked)}; this tokenizer cannot keep request text apart")
        return ids

    def encode_parts(self, parts: Sequence[PromptPart]) -> list[int]:
        """The token ids of the prompt the parts join to; added tokens only from template parts."""
        ids: list[int] = []
        pending: list[str] = []  # text since the last template-owned added token
        for part in parts:
            if part.from_request or not self.added_ids:
                pending.append(part.text)
                continue
            position = 0
            # The model's own tokenizer finds the added tokens of template text (its matching, in Rust:
            # longest first, lstrip/rstrip and normalized flags as the upstream would apply them).
            encoding = self.tokenizer.encode(part.text, add_special_tokens=False)
            for token_id, (begin, stop) in zip(encoding.ids, encoding.offsets, strict=True):
                if token_id in self.added_ids:
                    pending.append(part.text[position:begin])
                    ids += self._text_ids("".join(pending))
                    pending = []
                    ids.append(token_id)
                    position = stop
            pending.append(part.text[position:])
        ids += self._text_ids("".join(pending))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def encode(self, text: str) -> list[int]:
        """The model's own encoding of `text`, added tokens matched anywhere (what an upstream does)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def encode_plain(self, text: str) -> list[int]:
        """`text` encoded with no added tokens: a control token's text as ordinary tokens."""
        return list(self._plain.encode(text, add_special_tokens=False).ids)

    def generated(self, ids: Sequence[int], text: str) -> list[Token]:
        """The Tokens of one generated chunk: its `text` cut at the added tokens among its `ids`.

        An added/control id is `Token(its text, True)`; the text between them `Token(text, False)`;
        the pieces join to `text` exactly. The ordinary runs are decoded only to know where the next
        added token starts (an upstream holds a cut-off character back, so a run may decode to a
        few characters more or less than its part of `text`); an added token that cannot be found
        there leaves the rest of the chunk ordinary (it can open nothing). An id outside the vocabulary
        (`0 <= id < vocab_size`), which no model generates, is a `ValueError` naming it."""
        if ids and (min(ids) < 0 or max(ids) >= self.vocab_size):
            wrong = next(i for i in ids if not 0 <= i < self.vocab_size)
            raise ValueError(f"the upstream sent token id {wrong}, outside the tokenizer's vocabulary "
                             f"(0 to {self.vocab_size - 1}): is it serving the model this tokenizer is for?")
        pieces: list[Token] = []
        position = 0
        run: list[int] = []
        for token_id in ids:
            content = self._content.get(token_id)
            if content is None:
                run.append(token_id)
                continue
            start = position + max(0, len(self.decode(run)) - 3) if run else position
            found = text.find(content, start)
            if found < 0:
                break
            if found > position:
                pieces.append(Token(text[position:found], False))
            pieces.append(Token(content, True))
            position = found + len(content)
            run = []
        if position < len(text):
            pieces.append(Token(text[position:], False))
        return pieces

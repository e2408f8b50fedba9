"""The closed set of call-body kinds. Each is written once, with its incremental reader, its
progressive streamer and its grammar rules, and used by every format whose calls have that shape:

- `json_call`: one JSON call object `{"name", "arguments"}` (Hermes; Mistral Nemo list elements);
- `header_json`: a header naming the call up to declared markers, then one JSON object
  (DeepSeek R1 / V3 / V3.1);
- `tagged_params`: a call tag and tagged parameters whose text the tool schema types
  (Qwen3-Coder, DeepSeek V3.2 DSML);
- `json_arguments`: a call named before its body (by a message header), the body its JSON arguments
  (gpt-oss harmony).
- `tagged_block`: a message body that is one block of `tagged_params` calls, each named by its own tag
  (Muse Glimmer's ATEM block).
- `pythonic`: Python calls with keyword literals, `[f(a=1), g()]` or one `NAME.call(…)` (pythonic
  lists, Llama 3.1 built-ins);
- `code_call`: the whole body is one string argument of a fixed tool (Llama 3.1's `python` code);
- `template_calls`: a transformers `response_template` call field, read with its semantics when the
  envelope closes (formats imported with `format_from_response_template`);
- `first_character`: one of several declared kinds, chosen by the body's first characters (LFM2:
  a pythonic list or JSON call objects).

A format names its kind in its declaration (`EnvelopeSpec(openers, body=Kind(...))`) with the
kind's data (grammar, tags, markers); it brings no reader of its own.
"""

from __future__ import annotations

from .first_character import FirstCharacter
from .header_json import HeaderJson
from .json_arguments import JsonArguments
from .json_call import JsonCall
from .pythonic import CodeCall, PythonicCalls
from .tagged_block import TaggedBlock
from .tagged_params import TaggedParams
from .template_calls import TemplateCalls

BODY_KINDS = {"json_call": JsonCall, "header_json": HeaderJson, "tagged_params": TaggedParams,
              "json_arguments": JsonArguments, "pythonic": PythonicCalls, "code_call": CodeCall,
              "first_character": FirstCharacter, "tagged_block": TaggedBlock, "template_calls": TemplateCalls}

__all__ = ["BODY_KINDS", "CodeCall", "FirstCharacter", "HeaderJson", "JsonArguments", "JsonCall", "PythonicCalls",
           "TaggedBlock", "TaggedParams", "TemplateCalls"]

"""The grammar of a format's whole output: headed messages (`layouts_messages`) or envelopes
(`assemble`), chosen here so that neither of those modules imports the other."""

from __future__ import annotations

from ..grammar_ir import GrammarUnsupported
from ..spec import FormatSpec
from ..validation import Tools
from .assemble import Choice, Output, envelope_output
from .layouts_messages import messages_output


def output_grammar(spec: FormatSpec, tools: Tools | None, choice: Choice, thinking_forced_open: bool) -> Output:
    """The grammar of everything the format's model may write under `choice`, as its parts."""
    try:
        if spec.messages is not None:
            return messages_output(spec, tools, choice, thinking_forced_open)
        return envelope_output(spec, tools, choice, thinking_forced_open)
    except RecursionError:  # the body kinds bound their depth: a last guard
        raise GrammarUnsupported(f"the {spec.name} grammar of these tools nests too deeply to be built: simplify "
                                 "the tools' schemas (fewer nested levels or optional properties)") from None

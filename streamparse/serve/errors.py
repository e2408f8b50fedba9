"""The errors of rendering a prompt, apart from the renderer so that `marking` (which `template` calls)
can raise them without importing `template` back."""

from __future__ import annotations

__all__ = ["CapabilityError", "TemplateRenderError"]


class TemplateRenderError(ValueError):
    """The template refused the request (its `raise_exception`) or failed on it: the client's input is at fault."""


class CapabilityError(TemplateRenderError):
    """The request uses something the template cannot render (`capability` names it, as in `Capabilities`);
    rendering without it would silently drop part of the request."""

    def __init__(self, capability: str, message: str) -> None:
        super().__init__(message)
        self.capability = capability

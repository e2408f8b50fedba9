"""`streamparse serve`: an OpenAI-compatible chat endpoint in front of a raw `/v1/completions` server."""

from __future__ import annotations

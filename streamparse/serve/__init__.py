"""`streamparse serve`: an OpenAI-compatible chat endpoint in front of a raw `/v1/completions` server.

The rooms: `app` (the ASGI app, request handling, `serve()`), `workers` (several processes on one
port), `http` (the upstream client), `upstream` (an upstream's completions stream as checked chunks,
and its error answers), `sse` (answer chunks as events), `checks` (what a request and an upstream
answer must be), `template` (a model's chat template, rendered as transformers renders it),
`marking` (which spans of a prompt the request brought), `tokens` (a prompt as token ids), `access` (the
API key), `limits` (body and message bounds), `requests` (request ids, the log line), `metrics`
(`/metrics`) and `replay` (a stand-in upstream replaying a real output). The parser core never
imports this package; `ChatTemplate` is exported lazily by `streamparse` itself. Needs the `server`
extra.
"""

from __future__ import annotations

"""Who may use the proxy: one API key, sent as `Authorization: Bearer KEY` and compared in constant time.

`RequireApiKey` is ASGI middleware, so a refused request is answered before its body is read. As vLLM's
`--api-key` does, only the API paths need the key: `/health` (for load balancers) and `/metrics` (for
scrapers; counts only, no request content) stay open. A key sent in another header (`api-key`, a
cookie) does not count; `x-api-key`, the Anthropic SDK's, counts on that API's paths (`/v1/messages…`)
only. A refusal is written in the shape of the API asked (OpenAI's, Anthropic's, Ollama's).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["OPEN_PATHS", "RequireApiKey", "key_problem"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/health", "/metrics"})


def _digest(value: bytes) -> bytes:
    # Hashed first so that the comparison takes the same time whatever the length of what was sent.
    return hashlib.sha256(value).digest()


def key_problem(authorization: bytes | None, key_digest: bytes) -> str | None:
    """Why an `Authorization` header value does not carry the key whose SHA-256 is `key_digest`, or None."""
    if authorization is None:
        return "no API key: send the header 'Authorization: Bearer KEY' with the key streamparse serve was given"
    scheme, _, token = authorization.strip().partition(b" ")
    token = token.strip()
    if scheme.lower() != b"bearer" or not token:
        return "the Authorization header must read 'Bearer KEY'"
    if not hmac.compare_digest(_digest(token), key_digest):
        return "the API key is not the one this server accepts"
    return None


class RequireApiKey:
    """ASGI middleware: every HTTP request outside `open_paths` carries `Authorization: Bearer KEY`,
    else it is answered 401 with an OpenAI error body (`code: "invalid_api_key"`)."""

    def __init__(self, app: ASGIApp, key: str, open_paths: frozenset[str] = OPEN_PATHS) -> None:
        if not key:
            raise ValueError("the API key is empty")
        self.app = app
        self.key_digest = _digest(key.encode())
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        headers = [value for name, value in scope["headers"] if name == b"authorization"]
        anthropic = scope["path"].startswith("/v1/messages")
        keys = [value for name, value in scope["headers"] if name == b"x-api-key"] if anthropic else []
        if keys and not headers:  # the Anthropic SDK's header, on its API's paths only; the same check
            headers = [b"Bearer " + keys[0]] * len(keys)
        problem = ("send one Authorization header, not several" if len(headers) > 1
                   else key_problem(headers[0] if headers else None, self.key_digest))
        if problem is None:
            await self.app(scope, receive, send)
            return
        if anthropic:
            problem = problem.replace("'Authorization: Bearer KEY'", "'x-api-key: KEY'")
            payload: dict[str, Any] = {"type": "error", "error": {"type": "authentication_error", "message": problem}}
        elif scope["path"].startswith("/api/"):
            payload = {"error": problem}
        else:
            payload = {"error": {"message": problem, "type": "invalid_request_error", "param": None,
                                 "code": "invalid_api_key"}}
        body = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="streamparse"')]})
        await send({"type": "http.response.body", "body": body})

"""ASGI at the level of its messages, for the service's hot paths.

Starlette's per-request objects are built for generality: `Request.body()` runs an async
generator inside an `aclosing` context, `request.headers` builds a `Headers` object and
decodes every header to find one, and a `Response` lowers and encodes its headers from a
mapping and checks each for a content length and type. A tool call needs one header, a body
that arrives in one message, and an answer whose headers are known in advance: these do
that directly (bench/request_cost.py counts the difference per request); the headers are
`Access`'s dict of them (`request_headers`).
"""

from __future__ import annotations

from typing import Iterable

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

JSON = b"application/json"
RawHeaders = Iterable[tuple[bytes, bytes]]


async def read_body(receive: Receive) -> bytes:
    """The whole request body, as `Request.body()` reads it (ClientDisconnect if the client
    left first). Its size is capped by `Access` while it streams in."""
    message = await receive()
    if message["type"] == "http.request" and not message.get("more_body", False):
        return message.get("body", b"")  # the usual case: one message
    chunks: list[bytes] = []
    while True:
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        if message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(chunks)
        message = await receive()


class Answer(Response):
    """A complete HTTP answer with its raw headers given (a Starlette `Response` to whoever
    handles one). `headers`: extra headers, names in lower case, as bytes."""

    def __init__(self, body: bytes, status_code: int = 200, media_type: bytes = JSON, headers: RawHeaders = ()):
        self.body = body
        self.status_code = status_code
        self.background = None
        self.raw_headers = [(b"content-type", media_type), (b"content-length", b"%d" % len(body)), *headers]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body})

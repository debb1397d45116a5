"""Reading a model endpoint's answer within its budget: the HTTP layer under the provider SDKs.

A model's answer is untrusted input (a model, or whatever answers at its base_url, may send
without end), so no byte of it is read unbounded:

- `BoundedTransport` sits under the SDK's HTTP client: every body that is not an event stream
  (an error answer the SDK reads itself, a plain answer) is cut at the request's budget
  (`AnswerBudget.body_bytes`, LimitExceeded past it), and an answer that comes compressed
  although the client asked for none (`Accept-Encoding: identity`, so a small body cannot
  unpack to gigabytes) is refused;
- `read_body` and `sse_events` read a plain answer and a streamed one from the raw response the
  providers get from the SDK (`client.post(..., cast_to=httpx2.Response, stream=True)`): the
  SDK sends, authenticates and retries; parsing is one orjson call per body or event, without
  the SDK's typed models. An event (its `data:` lines together) is cut at the same budget.

The budget travels with the request: the provider sets `READING` around its SDK call, and the
transport reads it when the answer's headers arrive.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import orjson

from .base import AnswerBudget, ProviderError

_DEFAULT_BUDGET = AnswerBudget()
READING: contextvars.ContextVar[AnswerBudget] = contextvars.ContextVar("skillyard_answer_budget", default=_DEFAULT_BUDGET)
NO_COMPRESSION = {"Accept-Encoding": "identity"}


class BoundedTransport(httpx2.AsyncBaseTransport):
    """The SDK client's transport, with every plain body cut at the budget of the request."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None):
        self.inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise ProviderError(f"the endpoint sent a {encoding}-compressed answer although asked for none "
                                "(Accept-Encoding: identity); refused, so a small body cannot unpack without bound")
        if "text/event-stream" not in response.headers.get("content-type", ""):
            response.stream = _CappedStream(response.stream, READING.get())
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _CappedStream(httpx2.AsyncByteStream):
    __slots__ = ("budget", "inner")

    def __init__(self, inner: Any, budget: AnswerBudget):
        self.inner, self.budget = inner, budget

    async def __aiter__(self) -> AsyncIterator[bytes]:
        cap = self.budget.body_bytes
        read = 0
        async for chunk in self.inner:
            read += len(chunk)
            if read > cap:
                raise self.budget.body_over(read)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


async def read_body(response: httpx2.Response, budget: AnswerBudget) -> bytes:
    """A plain answer's body, at most `budget.body_bytes` of it as decoded (LimitExceeded past
    it); the connection is released either way."""
    cap = budget.body_bytes
    parts: list[bytes] = []
    read = 0
    try:
        async for chunk in response.aiter_bytes():
            read += len(chunk)
            if read > cap:
                raise budget.body_over(read)
            parts.append(chunk)
    finally:
        await response.aclose()
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def sse_events(response: httpx2.Response, budget: AnswerBudget) -> AsyncIterator[tuple[bytes, bytes]]:
    """(event name, data) of each event of an SSE body; an event past `budget.body_bytes` (an
    endless line) raises LimitExceeded. Comments and events without data are skipped. An event
    that comes in many pieces is joined once (no copy per piece: a drip stays linear)."""
    cap = budget.body_bytes
    parts: list[bytes] = []  # the start of an event whose end has not come yet
    size = 0
    carriage = False  # the last piece ended in "\r" (its "\n" may start the next one)
    async for chunk in response.aiter_bytes():
        if carriage and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        carriage = chunk.endswith(b"\r")
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if parts:
            if chunk.find(b"\n\n") < 0 and not (parts[-1].endswith(b"\n") and chunk.startswith(b"\n")):
                parts.append(chunk)
                size += len(chunk)
                if size > cap:
                    raise budget.body_over(size)
                continue
            chunk = b"".join(parts) + chunk
            parts.clear()
        start = 0
        while (end := chunk.find(b"\n\n", start)) >= 0:
            event = _event(chunk, start, end)
            if event is not None:
                yield event
            start = end + 2
        if start < len(chunk):
            parts.append(chunk[start:] if start else chunk)
            size = len(parts[0])
            if size > cap:
                raise budget.body_over(size)
    if parts:  # the last event without its blank line
        rest = b"".join(parts)
        event = _event(rest, 0, len(rest))
        if event is not None:
            yield event


def _event(block: bytes, start: int, end: int) -> tuple[bytes, bytes] | None:
    name = b""
    data: list[bytes] = []
    for line in block[start:end].split(b"\n"):
        if line.startswith(b"data:"):
            data.append(line[6:] if line[5:6] == b" " else line[5:])
        elif line.startswith(b"event:"):
            name = line[6:].strip()
    if not data:
        return None
    return name, data[0] if len(data) == 1 else b"\n".join(data)


def loads(data: bytes) -> Any:
    """A body or event's JSON. orjson first; the standard library's parser when orjson refuses
    (a lone UTF-16 surrogate, which the providers then replace: base.clean_response)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)

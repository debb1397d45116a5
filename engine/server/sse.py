"""Server-sent events: the frame format and a response that notices a client leaving.

Every frame is one engine event: `id:` is its `seq`, `event:` its `type`, `data:` the event
JSON (`Event.to_dict()`, one line; for a live event, `Event.json()` — written by
`event_frames` from pieces kept per type, step and run — around the data its Run encoded
once). A browser's `EventSource` or any SSE client resumes a
stream by sending the last `id:` it saw as `Last-Event-ID`.

`EventStreamResponse` listens for the client's disconnect *while* it waits for the next
event (Starlette's `StreamingResponse` notices only when a write fails, which for an idle
stream can be never), and tells its owner whether the client left early, so a run can be
cancelled the moment nobody is reading it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Mapping, Sequence

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from ..events import Event

MEDIA_TYPE = "text/event-stream"
PING = b": ping\n\n"  # a comment line: keeps proxies from closing an idle stream; clients ignore it
HEARTBEAT_S = 15.0


class Final(bytes):
    """The last chunk of a stream: sent together with the end of the response (one write)."""


def dumps(value: Any) -> str:
    """Compact JSON on one line (newlines inside strings are escaped, as SSE needs)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS


def _dumps_bytes(value: Any) -> bytes:
    try:
        return orjson.dumps(value, default=str, option=_ORJSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):  # integers beyond 64 bits, lone surrogates (escaped: still JSON)
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str).encode()


def frame(event: Mapping[str, Any]) -> bytes:
    """The SSE frame of one event dict (`type`, `seq`, …)."""
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event["seq"], event["type"].encode(), _dumps_bytes(event))


def event_frame(event: "Event") -> bytes:
    """The SSE frame of an engine event, around the data its Run encoded once (`Event.json`)."""
    body = event.json()
    if body is None:  # no fast encoding: the escaped fallback of `frame`
        return frame(event.to_dict())
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, event.type.encode(), body)


# `event_frames` writes a frame as `event_frame` does (the event JSON of `Event.json` around the
# data its Run encoded), joining pieces: the envelope's strings are encoded once and kept —
# per type and per (step, skill) for as long as the process runs (a project has few), the run
# and call ids for one batch of a run's events.
_NUMBERS = tuple(b"%d" % number for number in range(1024))  # seq: most runs have fewer events
_TYPES: dict[str, bytes] = {}  # type → its frame from `event:` to `"run_id":`
_STEPS: dict[tuple[str | None, str | None], bytes] = {}  # (step, skill) → ',"step_id":…,"skill":…'
_MAX_KEPT = 4096


def event_frames(events: "Sequence[Event]") -> list[bytes]:
    """The SSE frames of events, the bytes `event_frame` makes: one join of ready pieces per
    event instead of a dict per event for orjson to walk (a call's 15 frames: about 69,000
    instructions fewer). An event without encoded data, or with a string orjson refuses (a
    lone surrogate), takes `event_frame`."""
    frames: list[bytes] = []
    append = frames.append
    numbers, types, steps = _NUMBERS, _TYPES, _STEPS
    run_of = call_of = object()
    run_json = call_json = b""
    for event in events:
        kind, run_id, seq, ts, call, step, skill, _, _, data = event
        try:
            if run_id is not run_of:
                run_of, run_json = run_id, orjson.dumps(run_id)
            if call is not call_of:
                call_of, call_json = call, b"" if call is None else b',"tool_call_id":' + orjson.dumps(call)
            head = types.get(kind) or _type_piece(kind)
            ids = steps.get((step, skill))
            if ids is None:
                ids = _step_piece(step, skill)
            number = numbers[seq] if seq < 1024 else b"%d" % seq
            append(b"".join((b"id: ", number, head, run_json, b',"seq":', number, b',"ts":', b"%d" % ts, call_json, ids,
                             b',"data":', data, b"}\n\n")))
        except (TypeError, UnicodeEncodeError, orjson.JSONEncodeError):  # no encoded data (None), a lone surrogate…
            run_of = call_of = object()
            append(event_frame(event))
    return frames


def _type_piece(kind: str) -> bytes:
    if len(_TYPES) > _MAX_KEPT:
        _TYPES.clear()
    piece = _TYPES[kind] = b'\nevent: %s\ndata: {"type":%s,"run_id":' % (kind.encode(), orjson.dumps(kind))
    return piece


def _step_piece(step: str | None, skill: str | None) -> bytes:
    if len(_STEPS) > _MAX_KEPT:
        _STEPS.clear()
    piece = b"".join(name + orjson.dumps(value) for name, value in ((b',"step_id":', step), (b',"skill":', skill))
                     if value is not None)
    _STEPS[(step, skill)] = piece
    return piece


def wants_event_stream(accept: str | None) -> bool:
    return bool(accept) and MEDIA_TYPE in accept.lower()  # type: ignore[union-attr]


def event_stream_wanted(accept: bytes | None) -> bool:
    """`wants_event_stream` of the raw `Accept` header."""
    return accept is not None and _MEDIA_TYPE_BYTES in accept.lower()


_MEDIA_TYPE_BYTES = MEDIA_TYPE.encode()


def parse_last_event_id(value: str | None) -> int:
    """`Last-Event-ID` as a seq; anything that is not a non-negative integer counts as 0."""
    if value is None:
        return 0
    value = value.strip()
    return int(value) if value.isdigit() and len(value) < 19 else 0


class EventStreamResponse(Response):
    """Streams `frames` (bytes; `None` means "nothing new yet": send a heartbeat; a `Final`
    chunk ends the response in the same write).

    `on_close(client_left)` runs exactly once when the stream ends: `client_left` is True
    when the client disconnected before the last frame was sent.
    """

    media_type = MEDIA_TYPE

    def __init__(
        self,
        frames: AsyncIterator[bytes | None],
        *,
        on_close: Callable[[bool], None] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.frames = frames
        self.on_close = on_close
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})})

    async def __call__(self, scope: Scope, receive: Receive, send: Send, *, started: bool = False) -> None:
        """`started`: the response's start (and maybe some frames) went out already."""
        client_left = True
        try:
            if not started:
                await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            pump = asyncio.ensure_future(self._pump(send))
            listen = asyncio.ensure_future(_wait_for_disconnect(receive))
            try:
                await asyncio.wait((pump, listen), return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (pump, listen):
                    task.cancel()
                await asyncio.gather(pump, listen, return_exceptions=True)
            if pump.done() and not pump.cancelled() and pump.exception() is None:
                client_left = not pump.result()
        except OSError:
            client_left = True
        finally:
            with contextlib.suppress(Exception):
                await self.frames.aclose()  # type: ignore[attr-defined]
            if self.on_close is not None:
                self.on_close(client_left)

    async def _pump(self, send: Send) -> bool:
        """Send every frame; True when the stream was finished (not cut short)."""
        try:
            async for chunk in self.frames:
                if isinstance(chunk, Final):
                    await send({"type": "http.response.body", "body": bytes(chunk), "more_body": False})
                    return True
                await send({"type": "http.response.body", "body": PING if chunk is None else chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return True
        except OSError:  # the socket went away mid-write
            return False


async def _wait_for_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return

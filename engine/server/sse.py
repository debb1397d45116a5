"""Server-sent events: the frame format and a response that notices a client leaving.

Every frame is one engine event: `id:` is its `seq`, `event:` its `type`, `data:` the event
JSON (`Event.to_dict()`, one line), written by the one encoder, `event_frames`, around the
data its Run encoded once — for a live event (the hub's frames) and a stored one (a replay)
alike. A browser's `EventSource` or any SSE client resumes a stream by sending the last
`id:` it saw as `Last-Event-ID`.

`EventStreamResponse` listens for the client's disconnect *while* it waits for the next
event (Starlette's `StreamingResponse` notices only when a write fails, which for an idle
stream can be never), and tells its owner whether the client left early, so a run can be
cancelled the moment nobody is reading it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import operator
from typing import Any, AsyncIterator, Callable, Iterable, Mapping

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..runtime.events import Event

MEDIA_TYPE = "text/event-stream"
PING = b": ping\n\n"  # a comment line: keeps proxies from closing an idle stream; clients ignore it
HEARTBEAT_S = 15.0


class Final(bytes):
    """The last chunk of a stream: sent together with the end of the response (one write)."""


# The one encoder of the service's SSE frames, live or stored: `event_frames` writes an event's
# JSON (`Event.to_dict()`, compact, on one line) around the data its Run encoded once, joining
# ready pieces: the envelope's strings are encoded once and kept — per (type, step, skill) for
# as long as the process runs (a project has few), per seq below 1024, the run and call ids and
# the time for a batch of a run's events. What it buys, by `python -m bench.request_cost
# --cases sse` (callgrind, instructions per SSE request, no store, measured in one session):
# 840,800 against 905,400 for a frame per event written by `Event.json` and a `%` format (7.1 %);
# of that, the pieces kept per seq and the time written once per millisecond 36,500 (877,300
# without them: 4.2 %; 20,000 when first measured, docs/operations.md). bench.service could
# not separate them on this shared VM: its at-once ratios moved by ±0.03 between runs.
_IDS = tuple(b"id: %d" % seq for seq in range(1024))  # most runs have fewer events
_SEQS = tuple(b',"seq":%d,"ts":' % seq for seq in range(1024))
_PIECES: dict[tuple[str, str | None, str | None], tuple[bytes, bytes]] = {}  # (type, step, skill) → (head, tail)
_MAX_KEPT = 4096
_END = b"}\n\n"


def event_frames(events: "Iterable[Event]") -> list[bytes]:
    """The SSE frames of events: `id:` is its seq, `event:` its type, `data:` its JSON.

    One join of ready pieces per event, around the data its Run encoded (or, for an event
    without it — a stored one —, its data encoded here). What orjson cannot write (a lone
    surrogate, an integer beyond 64 bits) takes the one fallback, `_escaped_frame`."""
    frames: list[bytes] = []
    append = frames.append
    ids, seqs, pieces, end = _IDS, _SEQS, _PIECES, _END
    run_of = call_of = ts_of = object()
    run_json = call_json = ts_text = b""
    for event in events:
        kind, run_id, seq, ts, call, step, skill, data = _ENVELOPE(event)
        try:
            if data is None:
                data = orjson.dumps(event.data, default=str, option=orjson.OPT_NON_STR_KEYS)
            if run_id is not run_of:
                run_of, run_json = run_id, orjson.dumps(run_id)
            if call is not call_of:
                call_of, call_json = call, b"" if call is None else b',"tool_call_id":' + orjson.dumps(call)
            if ts != ts_of:  # a run's events share a few milliseconds
                ts_of, ts_text = ts, b"%d" % ts
            head, tail = pieces.get((kind, step, skill)) or _pieces(kind, step, skill)
            if seq < 1024:
                id_text, seq_text = ids[seq], seqs[seq]
            else:
                id_text, seq_text = b"id: %d" % seq, b',"seq":%d,"ts":' % seq
            append(b"".join((id_text, head, run_json, seq_text, ts_text, call_json, tail, data, end)))
        except (TypeError, UnicodeEncodeError, orjson.JSONEncodeError):  # a lone surrogate, an integer beyond 64 bits…
            run_of = call_of = object()
            append(_escaped_frame(event.to_dict()))
    return frames


def stored_frames(events: "Iterable[Mapping[str, Any]]") -> list[bytes]:
    """The SSE frames of stored events (dicts as `Event.to_dict()` gives them), by `event_frames`."""
    return event_frames(map(Event.from_dict, events))


def _escaped_frame(event: Mapping[str, Any]) -> bytes:
    """The frame of an event orjson cannot write: the standard library's JSON, non-ASCII
    escaped (a lone surrogate comes out as `\\udc80`: still valid JSON), non-JSON values as
    their str."""
    body = json.dumps(event, ensure_ascii=True, separators=(",", ":"), default=str)
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event["seq"], str(event["type"]).encode("ascii", "backslashreplace"),
                                                  body.encode())


# An event's envelope and encoded data, read by field name in one C call (as fast as unpacking
# the tuple, which would break silently if Event gained a field).
_ENVELOPE = operator.attrgetter("type", "run_id", "seq", "ts", "tool_call_id", "step_id", "skill", "data_json")


def _pieces(kind: str, step: str | None, skill: str | None) -> tuple[bytes, bytes]:
    """The frame's parts around the run id (head) and before the data (tail) for an event of
    this type, step and skill."""
    if len(_PIECES) > _MAX_KEPT:
        _PIECES.clear()
    head = b'\nevent: %s\ndata: {"type":%s,"run_id":' % (kind.encode(), orjson.dumps(kind))
    names = b"".join(name + orjson.dumps(value) for name, value in ((b',"step_id":', step), (b',"skill":', skill))
                     if value is not None)
    found = _PIECES[(kind, step, skill)] = head, names + b',"data":'
    return found


def wants_event_stream(accept: str | None) -> bool:
    return accept is not None and MEDIA_TYPE in accept.lower()


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
                await self.frames.aclose()  # type: ignore[attr-defined]  # the frames come from an async generator
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

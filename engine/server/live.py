"""Answering a request with a run the service started: its SSE stream, or its end."""

from __future__ import annotations

import asyncio
import contextlib

from fastapi import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .hub import LiveRun, RunHub
from .raw import Answer
from .sse import HEARTBEAT_S, MEDIA_TYPE, EventStreamResponse


async def finished_or_left(request: Request, run: LiveRun) -> bool:
    """Wait for the run's task, then for its commit (`store.durability: committed`: the answer
    goes out once the run is recorded); False if the client disconnected first (the run is then
    cancelled, unless it asked to run in the background)."""
    assert run.task is not None
    if run.task.done():  # finished already: no disconnect watcher (a task) needed
        if run.unrecorded:
            await run.recorded()
        return True
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((run.task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if run.task.done():
        if run.unrecorded:
            await run.recorded()
        return True
    if not run.background:
        run.task.cancel()
    return False


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def stream(hub: RunHub, run: LiveRun, after: int, *, cancel_on_disconnect: bool) -> Response:
    """The run's events from `after` on, live to its end; a client that leaves a run it
    started (not in the background) cancels it. A run that has ended already is answered in
    one body when memory holds what is asked: no tasks watching a stream that has nothing
    left to wait for."""
    if run.done:  # (as `follow` does, events still held back for a gap are not waited for)
        frames = run.frames_after(after)
        if frames is not None:
            answer = Answer(b"".join(frames), 200, _EVENT_STREAM_TYPE, _stream_headers(run))
            return AfterCommit(run, answer) if run.unrecorded else answer
    return _live_stream(hub, run, after, cancel_on_disconnect)  # (older events: from the store)


def _live_stream(hub: RunHub, run: LiveRun, after: int, cancel_on_disconnect: bool) -> EventStreamResponse:
    def on_close(client_left: bool) -> None:
        if client_left and cancel_on_disconnect:
            _left(hub, run)

    run.watch()
    return EventStreamResponse(run.follow(after, heartbeat=HEARTBEAT_S), on_close=on_close, headers={"X-Run-Id": run.run_id})


class AnnouncedStream(Response):
    """The SSE answer of a call started with `announce_start`: the frames so far (its
    `tool_call_start`) go out at once; one turn of the loop later a call that never waits
    has ended, and the rest goes out with the end in one write. A call still going then is
    followed live, as `stream` does."""

    def __init__(self, hub: RunHub, run: LiveRun):
        self.hub, self.run = hub, run
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", _EVENT_STREAM_TYPE), *_stream_headers(run)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        run = self.run
        frames = run.frames_after(0)
        if frames is None:  # it made more events than memory holds already: the stream reads the store
            await _live_stream(self.hub, run, 0, True)(scope, receive, send)
            return
        sent, first = len(frames), b"".join(frames)  # seq 1 … sent
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": first, "more_body": True})
        except OSError:  # the client left at once
            _left(self.hub, run)
            return
        await asyncio.sleep(0)  # one turn of the loop
        rest = run.frames_after(sent) if run.done else None
        if rest is not None:
            if run.unrecorded:  # the last frame goes out once the run is committed
                await run.recorded()
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"".join(rest), "more_body": False})
            return
        await _live_stream(self.hub, run, sent, True)(scope, receive, send, started=True)


class AfterCommit(Response):
    """`answer` (the whole SSE body of an ended run), sent once the run is committed."""

    def __init__(self, run: LiveRun, answer: Response):
        self.run, self.answer = run, answer
        self.status_code, self.background, self.raw_headers = answer.status_code, None, answer.raw_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.run.recorded()
        await self.answer(scope, receive, send)


def _left(hub: RunHub, run: LiveRun) -> None:
    if not run.background:
        hub.cancel(run.run_id)


def _stream_headers(run: LiveRun) -> list[tuple[bytes, bytes]]:
    return [(b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no"), (b"x-run-id", run.run_id.encode())]


_EVENT_STREAM_TYPE = f"{MEDIA_TYPE}; charset=utf-8".encode()  # as Starlette labels a text/ type

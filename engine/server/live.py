"""Answering a request with a run the service started: its SSE stream, or its end."""

from __future__ import annotations

import asyncio

from fastapi import Request

from .hub import LiveRun, RunHub
from .sse import HEARTBEAT_S, EventStreamResponse


async def finished_or_left(request: Request, run: LiveRun) -> bool:
    """Wait for the run's task; False if the client disconnected first (the run is then
    cancelled, unless it asked to run in the background)."""
    assert run.task is not None
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((run.task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if run.task.done():
        return True
    if not run.background:
        run.task.cancel()
    return False


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def stream(hub: RunHub, run: LiveRun, after: int, *, cancel_on_disconnect: bool) -> EventStreamResponse:
    """The run's events from `after` on, live to its end; a client that leaves a run it
    started (not in the background) cancels it."""

    def on_close(client_left: bool) -> None:
        if client_left and cancel_on_disconnect and not run.background:
            hub.cancel(run.run_id)

    return EventStreamResponse(run.follow(after, heartbeat=HEARTBEAT_S), on_close=on_close, headers={"X-Run-Id": run.run_id})

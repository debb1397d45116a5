"""How many finished runs the service keeps in memory (issue 13): with a run store only a few
(the store answers for the others: reads flush it first), without one KEEP_FINISHED. A run
gone from memory replays from the store exactly as its call streamed it. The app in process,
on a real project and a real SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402

from engine import Engine  # noqa: E402
from engine.server import create_app  # noqa: E402
from engine.server.hub import KEEP_FINISHED, KEEP_FINISHED_WITH_STORE  # noqa: E402
from server_helpers import parse_sse, write_project  # noqa: E402

SSE = {"Accept": "text/event-stream"}


async def _streamed_calls(app: Any, count: int) -> tuple[list[str], dict[str, str]]:
    """`count` streamed echo calls, then the first one's replay: (run ids, {run id: SSE text})."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        answers = {}
        for index in range(count):
            answer = await client.post("/v1/tools/echo/call", json={"name": f"n{index}"}, headers=SSE)
            assert answer.status_code == 200
            answers[answer.headers["x-run-id"]] = answer.text
        ids = list(answers)
        replay = await client.get(f"/v1/runs/{ids[0]}/events", headers=SSE)
        assert replay.status_code == 200
        return ids, {"call": answers[ids[0]], "replay": replay.text}


def test_with_a_store_few_finished_runs_stay_and_the_others_replay_from_it(tmp_path: Path) -> None:
    engine = Engine.from_dir(write_project(tmp_path), store=True)
    try:
        assert engine.store is not None
        app = create_app(engine, api_keys="", mcp=False)
        hub = app.state.hub
        assert hub.keep_finished == KEEP_FINISHED_WITH_STORE
        ids, texts = asyncio.run(_streamed_calls(app, KEEP_FINISHED_WITH_STORE + 5))
        assert len(hub.runs) == KEEP_FINISHED_WITH_STORE and set(hub.runs) == set(ids[-KEEP_FINISHED_WITH_STORE:])
        call, replay = parse_sse(texts["call"]), parse_sse(texts["replay"])
        assert [frame["event"] for frame in call][-1] == "tool_call_result"
        assert replay == call  # from the store, the same frames the call streamed
    finally:
        engine.close()


def test_without_a_store_memory_is_the_history(tmp_path: Path) -> None:
    engine = Engine.from_dir(write_project(tmp_path), store=False)
    try:
        assert engine.store is None
        assert create_app(engine, api_keys="", mcp=False).state.hub.keep_finished == KEEP_FINISHED
        assert create_app(engine, api_keys="", mcp=False, keep_finished=3).state.hub.keep_finished == 3
    finally:
        engine.close()

"""A model's answer is untrusted input: past `limits.max_tool_args_bytes` or `limits.max_answer_chars`
the model call ends with `limit_exceeded`, memory stays bounded, and the event loop keeps turning.

Each mode of the hostile model server (tests/hostile_model_server.py) answers four concurrent
agent runs, over the OpenAI and the Anthropic wire, streamed (someone watches the run) and plain
(nobody does: the server streams anyway, or sends a body without end). A ticker on the loop
measures its longest stall; psutil the process's memory, during and after.
"""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from engine import Engine
from engine.errors import LimitExceeded
from engine.providers.base import AnswerBudget, AnswerMeter
from fake_llm_servers import write_project
from hostile_model_server import HostileModelServer

MiB = 1 << 20
LIMIT_OF = {"endless_args": "limits.max_tool_args_bytes", "endless_text": "limits.max_answer_chars",
            "huge_body": "limits.max_answer_chars", "slow_drip": "limits.max_answer_chars"}


class Ticker:
    """Wakes every 10 ms on the loop and keeps the longest gap between two wake-ups (`longest`:
    wall time; `busiest`: the CPU time the loop's thread spent in a gap, which is what blocks
    the loop: on a shared machine a wall gap may be another process's turn), and the process's
    largest RSS seen."""

    def __init__(self) -> None:
        self.longest = self.busiest = 0.0
        self.peak_rss = 0
        self._process = psutil.Process()

    async def run(self, stop: asyncio.Event) -> None:
        last, last_cpu = time.perf_counter(), time.thread_time()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now, cpu = time.perf_counter(), time.thread_time()
            self.longest = max(self.longest, now - last)
            self.busiest = max(self.busiest, cpu - last_cpu)
            self.peak_rss = max(self.peak_rss, self._process.memory_info().rss)
            last, last_cpu = now, cpu


def _project(tmp_path: Path, server: HostileModelServer, provider: str) -> Path:
    root = write_project(tmp_path / "project", {"bad": server.model_entry(provider)})
    if server.mode == "slow_drip":  # the drip reaches the smallest text budget in about a second
        (root / "config" / "engine.yaml").write_text("limits:\n  max_answer_chars: 1000\n")
    return root


async def _four_runs(engine: Engine, watched: bool) -> tuple[list[Any], Ticker]:
    agent = engine.agent("bad", tools=["echo"])
    ticker, stop = Ticker(), asyncio.Event()
    ticking = asyncio.create_task(ticker.run(stop))
    on_event = (lambda event: None) if watched else None
    try:
        results = await asyncio.wait_for(asyncio.gather(*(agent.run("go", on_event=on_event) for _ in range(4))), 60)
    finally:
        stop.set()
        await ticking
    return results, ticker


@pytest.mark.parametrize("watched", [True, False], ids=["streamed", "plain"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("mode", ["endless_args", "endless_text", "huge_body", "slow_drip"])
def test_an_answer_without_end_ends_the_call_with_limit_exceeded(tmp_path: Path, mode: str, provider: str,
                                                                 watched: bool) -> None:
    process = psutil.Process()
    with HostileModelServer(mode) as server:
        engine = Engine.from_dir(_project(tmp_path, server, provider))
        engine.project.provider("bad")  # its SDK is imported now, not on the loop under watch
        gc.collect()
        before = process.memory_info().rss
        results, ticker = asyncio.run(_four_runs(engine, watched))
        sent = server.sent
    gc.collect()
    after = process.memory_info().rss
    for result in results:
        assert result.stop_reason == "error", (result.stop_reason, result.answer[:80])
        assert LIMIT_OF[mode] in (result.error or ""), result.error
    assert sent < server.limit_bytes, f"the server wrote {sent / MiB:.0f} MiB: the client kept reading"
    assert ticker.busiest < 0.25, f"the event loop was blocked {ticker.busiest * 1000:.0f} ms (longest gap " \
                                  f"{ticker.longest * 1000:.0f} ms)"
    assert ticker.peak_rss - before < 80 * MiB, f"RSS grew {(ticker.peak_rss - before) / MiB:.0f} MiB during the calls"
    assert after - before < 40 * MiB, f"{(after - before) / MiB:.0f} MiB stayed after the calls"


def test_the_run_says_which_limit_and_its_code(tmp_path: Path) -> None:
    with HostileModelServer("endless_args") as server:
        engine = Engine.from_dir(_project(tmp_path, server, "openai"))
        events: list[Any] = []
        result = asyncio.run(asyncio.wait_for(engine.agent("bad", tools=["echo"]).run("go", on_event=events.append), 30))
    error = next(e for e in events if e.type == "agent_error")
    assert error.data["code"] == "limit_exceeded"
    assert "limits.max_tool_args_bytes" in result.error and "1,048,576 bytes" in result.error


def test_the_settings_reach_the_budget(tmp_path: Path) -> None:
    with HostileModelServer("endless_text") as server:
        root = _project(tmp_path, server, "openai")
        (root / "config" / "engine.yaml").write_text("limits:\n  max_answer_chars: 20000\n")
        result = asyncio.run(asyncio.wait_for(Engine.from_dir(root).agent("bad").run("go"), 30))
    assert "passed 20,000 characters" in (result.error or ""), result.error


def test_the_meter_counts_utf8_bytes_of_arguments() -> None:
    meter = AnswerMeter(AnswerBudget(max_tool_args_bytes=1024, max_answer_chars=1000))
    meter.arguments("é" * 512)  # 1,024 bytes: at the limit
    with pytest.raises(LimitExceeded) as caught:
        meter.arguments("é")
    assert caught.value.details == {"setting": "limits.max_tool_args_bytes", "limit": 1024}


@pytest.mark.parametrize("watched", [True, False], ids=["streamed", "plain"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_compressed_answer_is_refused_unread(tmp_path: Path, provider: str, watched: bool) -> None:
    """Requests say `Accept-Encoding: identity`; an answer gzip-compressed all the same (a small
    body that inflates) ends the model call with an error saying so, before any of it is unpacked."""
    with HostileModelServer("gzip_body") as server:
        engine = Engine.from_dir(_project(tmp_path, server, provider))
        events: list[Any] = []
        on_event = events.append if watched else None
        result = asyncio.run(asyncio.wait_for(engine.agent("bad").run("go", on_event=on_event), 30))
    assert server.accept_encodings and set(server.accept_encodings) == {"identity"}, server.accept_encodings
    assert result.stop_reason == "error", (result.stop_reason, result.answer[:80])
    assert "gzip-compressed answer although asked for none" in (result.error or ""), result.error
    assert not result.answer

"""An MCP server is untrusted input: a budget for everything it sends, against a real hostile
server (tests/hostile_mcp_server.py, in a subprocess).

Sampling is a few requests per call, each a model call of the run (usage, cost, token_budget);
progress past the run's event cap cancels the call; text is cut (progress, stderr); oversized
tool listings and name collisions are problems of that tool alone; a list_changed flood
relinks a few times; a 401 says `unauthorized`. Each budget test checks the event loop kept
turning (a ticker sees no gap of 250 ms) and, where the attack is memory, that RSS stays put.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, TypeVar

import httpx
import psutil
import pytest

from engine import Engine
from engine.cli.main import main
from engine.executors.mcp_client import registry
from engine.link.linker import load_project
from engine.logging import configure_logging
from fake_llm_servers import FakeServer, OpenAIWire
from secrets_support import write
from server_helpers import free_port, running_server

HOSTILE = str(Path(__file__).resolve().parents[1].joinpath("hostile_mcp_server.py"))
LOCAL_TOOL = "tools:\n  local:\n    type: fetch\n    description: A local tool.\n"
MOCK_MODELS = "default: mock\nmodels:\n  mock: {provider: mock}\n"
MAX_GAP = 0.25  # seconds the event loop may go without turning while a server attacks
MB = 1 << 20
T = TypeVar("T")

pytestmark = pytest.mark.slow  # every test starts the hostile server


@pytest.fixture(autouse=True)
def stop_servers() -> Iterator[None]:
    yield
    registry.close_all()  # no child outlives its test


def hostile(*modes: str, **extra: Any) -> dict[str, Any]:
    args = [HOSTILE, *(part for mode in modes for part in ("--mode", mode))]
    return {"command": sys.executable, "args": args, **extra}


def project(root: Path, server: dict[str, Any], *, models: str = MOCK_MODELS, engine_yaml: str = "") -> Path:
    files = {"tools.yaml": LOCAL_TOOL, "config/models.yaml": models, "config/mcp.yaml": json.dumps({"mcpServers": {"h": server}})}
    if engine_yaml:
        files["config/engine.yaml"] = engine_yaml
    return write(root, files)


def engine_for(root: Path, **options: Any) -> Engine:
    return Engine.from_project(load_project(root, isolate_broken_tools=True), **options)


def while_ticking(work: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    """`work()`'s result, and the longest a 10 ms ticker on the same event loop waited meanwhile."""
    async def both() -> tuple[T, float]:
        done, longest = asyncio.Event(), 0.0

        async def tick() -> None:
            nonlocal longest
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                longest, last = max(longest, now - last), now

        ticker = asyncio.create_task(tick())
        try:
            return await work(), longest
        finally:
            done.set()
            await ticker
    return asyncio.run(both())


def rss() -> int:
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def test_sampling_is_a_few_model_calls_of_the_run_each_at_most_the_models_max_tokens(tmp_path: Path) -> None:
    wire = OpenAIWire()
    with FakeServer() as model:
        model.script(*(wire.reply(f"hi {i}", usage=(100, 50)) for i in range(20)))
        entry = wire.model_entry(model.url, max_tokens=64, prices={"input": 1.0, "output": 2.0})
        models = json.dumps({"default": "gpt", "models": {"gpt": entry}})
        engine = engine_for(project(tmp_path, hostile(sampling="gpt"), models=models))
        events: list[Any] = []
        try:
            engine.call_tool_sync("h_sampling_flood", {"count": 1, "max_tokens": 10})  # the model's SDK is imported
            result, gap = while_ticking(lambda: engine.call_tool("h_sampling_flood", {"count": 20, "max_tokens": 1_000_000},
                                                                 on_event=events.append))
        finally:
            engine.close()
        warm, *asked = [body.get("max_tokens") or body.get("max_completion_tokens") for body in model.bodies]
    assert result.error is None, result.error
    answers = result.data["answers"]
    assert result.data["answered"] == 3 and len(asked) == 3, answers  # sampling.max_requests, default 3
    assert "sampling.max_requests" in answers[3]
    assert warm == 10 and asked == [64, 64, 64]  # the model's own max_tokens, not the server's 1,000,000
    exchanges = [e for e in events if e.type == "model_exchange"]
    assert len(exchanges) == 3 and all(e.tool_call_id == result.tool_call_id for e in exchanges)
    assert exchanges[0].data["server"] == "h" and exchanges[0].data["usage"]["input_tokens"] == 100
    usage = result.metadata["usage"]
    assert usage["input_tokens"] == 300 and usage["output_tokens"] == 150
    assert usage["cost_usd"] == pytest.approx(3 * (100 * 1.0 + 50 * 2.0) / 1e6)
    assert gap < MAX_GAP


def test_sampling_counts_against_the_agents_token_budget(tmp_path: Path) -> None:
    from engine.runtime.agent import AgentLimits

    wire = OpenAIWire()
    with FakeServer() as model:
        call = ("call_1", "h_sampling_flood", json.dumps({"count": 3, "max_tokens": 500}))
        model.script(wire.reply(calls=[call], usage=(10, 5)), *(wire.reply("sampled", usage=(1000, 500)) for _ in range(3)),
                     wire.reply("the end", usage=(10, 5)))
        models = json.dumps({"default": "gpt", "models": {"gpt": wire.model_entry(model.url)}})
        engine = engine_for(project(tmp_path, hostile(sampling="gpt"), models=models))
        try:
            agent = engine.agent("gpt", limits=AgentLimits(token_budget=2000))
            result = asyncio.run(agent.run("Call the tool."))
        finally:
            engine.close()
        requests = len(model.bodies)
    assert result.stop_reason == "token_budget", (result.stop_reason, result.error)
    assert result.usage.input_tokens == 10 + 3 * 1000 and result.usage.output_tokens == 5 + 3 * 500
    assert requests == 4  # the agent did not ask its model again


def test_sampling_in_flight_is_capped_per_server(tmp_path: Path) -> None:
    wire = OpenAIWire()
    with FakeServer() as model, http_hostile() as url:
        model.script(*(wire.reply("slow", usage=(1, 1), delay=0.5) for _ in range(10)))
        models = json.dumps({"default": "gpt", "models": {"gpt": wire.model_entry(model.url)}})
        engine = engine_for(project(tmp_path, {"url": url, "sampling": {"model": "gpt", "max_requests": 2}}, models=models))

        async def two_calls() -> list[Any]:
            return list(await asyncio.gather(*(engine.call_tool("h_sampling_parallel", {"count": 2}) for _ in range(2))))
        try:
            engine.call_tool_sync("h_sampling_parallel", {"count": 1})  # the model's SDK is imported
            results, gap = while_ticking(two_calls)
        finally:
            engine.close()
        requests = len(model.bodies) - 1
    assert all(r.error is None for r in results), [r.error for r in results]
    answers = [a for r in results for a in r.data["answers"]]
    assert requests == 2 and sum(a.startswith("answered") for a in answers) == 2, answers  # each call asked 2: 4 at once
    assert sum("2 sampling requests of this server are in flight" in a for a in answers) == 2
    assert gap < MAX_GAP


def test_a_sampling_request_past_its_input_cap_is_refused_without_a_model_call(tmp_path: Path) -> None:
    """2,000,000 characters in four messages (the server filling the model's context): refused with
    an MCP error naming `sampling.max_input_chars`, no model asked; one within it is answered."""
    wire = OpenAIWire()
    with FakeServer() as model:
        model.script(*(wire.reply("hi", usage=(1, 1)) for _ in range(3)))
        models = json.dumps({"default": "gpt", "models": {"gpt": wire.model_entry(model.url)}})
        engine = engine_for(project(tmp_path, hostile(sampling={"model": "gpt", "max_input_chars": 1000}), models=models))
        events: list[Any] = []
        try:
            huge = engine.call_tool_sync("h_sampling_huge", {"size": 2_000_000, "messages": 4}, on_event=events.append)
            asked = len(model.bodies)
            small = engine.call_tool_sync("h_sampling_huge", {"size": 1000, "messages": 4})
        finally:
            engine.close()
    assert huge.error is None and small.error is None, (huge.error, small.error)
    refused = huge.data["answer"]
    assert refused.startswith("refused:") and "sampling.max_input_chars" in refused and "1,000 characters" in refused, refused
    assert asked == 0 and not [e for e in events if e.type == "model_exchange"]
    assert small.data["answer"] == "answered: hi" and len(model.bodies) == 1


def test_the_sampling_input_cap_defaults_to_100000_characters() -> None:
    from engine.spec.mcp_config import McpSamplingSpec

    assert McpSamplingSpec(model="mock").max_input_chars == 100_000


def test_progress_past_the_event_cap_cancels_the_call_without_a_traceback(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "cancelled.txt"
    root = project(tmp_path / "p", hostile(env={"HOSTILE_MARKER": str(marker)}), engine_yaml="limits:\n  max_events_per_run: 500\n")
    engine = engine_for(root)
    try:
        result, gap = while_ticking(lambda: engine.call_tool("h_progress_flood", {"count": 30_000}))
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        after = engine.call_tool_sync("h_echo", {"text": "still here"})
    finally:
        engine.close()
    assert result.error is not None and result.error.code == "limit_exceeded", result
    assert "limits.max_events_per_run" in result.error.message
    assert marker.exists() and marker.read_text().startswith("cancelled after"), "notifications/cancelled never reached it"
    assert after.error is None
    logged = "".join(capfd.readouterr())
    assert "Traceback" not in logged and "Exception in callback" not in logged, logged[-2000:]
    assert gap < MAX_GAP


def test_huge_progress_messages_are_cut_like_log_messages(tmp_path: Path) -> None:
    engine = engine_for(project(tmp_path, hostile()), store=tmp_path / "runs.db")
    messages: list[str] = []
    try:
        engine.call_tool_sync("h_echo", {"text": "warm"})
        before = rss()
        result, gap = while_ticking(lambda: engine.call_tool(
            "h_progress_huge", {"count": 60, "size": 2_000_000},
            on_event=lambda e: messages.append(e.data["message"]) if e.data.get("stage") == "progress" else None))
        grown = rss() - before
        engine.store.flush(10)  # type: ignore[union-attr]
    finally:
        engine.close()
    stored = sum(p.stat().st_size for p in tmp_path.glob("runs.db*"))
    assert result.error is None, result.error
    assert len(messages) == 60 and max(map(len, messages)) <= 4001
    assert stored < 20 * MB, stored  # 230 MB before
    assert grown < 100 * MB, grown / MB  # 300 MB before
    assert gap < MAX_GAP


def test_stderr_without_a_newline_is_read_in_chunks_and_cut(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path, hostile(timeout="120s"))
    engine = engine_for(root)
    configure_logging("json", "info")
    try:
        engine.call_tool_sync("h_echo", {"text": "warm"})
        capfd.readouterr()
        before = rss()
        result, gap = while_ticking(lambda: engine.call_tool("h_stderr_flood", {"megabytes": 400}))
        grown = rss() - before
        ended = engine.call_tool_sync("h_stderr_flood", {"megabytes": 0, "newline": True})  # the line ends here
        time.sleep(0.5)
    finally:
        configure_logging()
        engine.close()
    logged = [line for line in "".join(capfd.readouterr()).splitlines() if "MCP server stderr" in line]
    assert result.error is None and ended.error is None, (result.error, ended.error)
    assert grown < 100 * MB, grown / MB  # 400-600 MB before, never freed
    assert logged and all(len(line) < 4500 for line in logged) and "x" * 4000 in logged[0]
    assert gap < MAX_GAP


def test_huge_descriptions_titles_and_schemas_break_only_their_tool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path, hostile("huge-descriptions"))
    engine = engine_for(root)
    try:
        broken = {name: " ".join(i.message for i in issues) for name, issues in engine.project.broken.items()}
        schemas = json.dumps(engine.tool_schemas("openai"))
        echoed = engine.call_tool_sync("h_echo", {"text": "the rest works"})
    finally:
        engine.close()
    assert "description is 2,300,000 bytes" in broken["h_huge_description"], broken
    assert "title is 2,300,000 bytes" in broken["h_huge_title"]
    assert "inputSchema is" in broken["h_huge_schema"] and "65,536" in broken["h_huge_schema"]
    assert echoed.error is None and len(schemas) < 100_000  # 2.3 MB went into every agent request before
    assert main(["mcp", "list", "--dir", str(root)]) == 1
    listed = capsys.readouterr().out
    assert "h_huge_description — PROBLEM: " in listed and "h_echo — Say the text back." in listed
    assert len(listed) < 20_000


def test_a_servers_tool_named_like_a_local_one_is_the_servers_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.server.app import create_app

    root = project(tmp_path, hostile("collide", prefix="", env={"HOSTILE_COLLIDE": "local"}))
    engine = engine_for(root)

    async def ready() -> httpx.Response:
        app = create_app(engine, api_keys="", mcp=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as http:
            return await http.get("/readyz")

    try:
        local, problems, status = engine.project.tools["local"], [str(p) for p in engine.project.problems], asyncio.run(ready())
        broken = dict(engine.project.broken)
    finally:
        engine.close()
    assert local.executor.kind != "mcp" and "local" not in broken, broken  # the local tool keeps its name
    assert any("h:local:" in p and "a name already used" in p for p in problems), problems
    assert status.json()["status"] == "ready"
    main(["mcp", "list", "--dir", str(root)])
    assert "local — PROBLEM: h:local:" in capsys.readouterr().out


class _Relinks:
    def __init__(self) -> None:
        self.count = 0

    def heard(self) -> None:
        self.count += 1


def test_a_list_changed_flood_relinks_a_few_times(tmp_path: Path) -> None:
    root = project(tmp_path, hostile())
    engine = engine_for(root)
    relinks = _Relinks()
    registry.watch_tool_sources(root, relinks.heard)
    try:
        started = time.monotonic()
        result, gap = while_ticking(lambda: engine.call_tool("h_list_changed_flood", {"count": 3000}))
        flood = time.monotonic() - started
        time.sleep(2.5)  # the debounced relist has come and gone
        echoed = engine.call_tool_sync("h_echo", {"text": "still linked"})
    finally:
        engine.close()
    assert result.error is None and echoed.error is None, (result.error, echoed.error)
    assert 1 <= relinks.count <= 2 + flood, (relinks.count, flood)  # one a second at most; 48 before
    assert gap < MAX_GAP


@contextlib.contextmanager
def http_hostile(*modes: str) -> Iterator[str]:
    """The hostile server on Streamable HTTP: its URL."""
    port = free_port()
    child = subprocess.Popen([sys.executable, HOSTILE, "http", str(port), *(p for m in modes for p in ("--mode", m))],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        registry.close_all()
        child.terminate()
        child.wait(10)


def test_an_http_server_answering_401_is_unauthorized_and_retried_with_backoff(tmp_path: Path) -> None:
    with http_hostile("unauthorized") as url:
        root = project(tmp_path, {"url": url, "headers": {"Authorization": "Bearer wrong"}, "startup_timeout": "5s"})
        engine = engine_for(root)
        try:
            conn = registry.connections(root)["h"]
            problem = " ".join(i.message for i in engine.project.broken["h_*"])
            time.sleep(3)
            attempts = conn.attempts
        finally:
            engine.close()
    assert conn.reason.startswith("unauthorized: MCP server 'h' answered 401"), conn.reason
    assert "unauthorized" in problem and "cancel scope" not in problem, problem
    assert "Bearer wrong" not in problem
    assert 2 <= attempts <= 5, attempts  # 0.5 s, 1 s, 2 s… apart, not a tight loop


def test_the_service_answers_healthz_while_a_server_floods_a_call(tmp_path: Path) -> None:
    root = project(tmp_path, hostile(), engine_yaml="limits:\n  max_events_per_run: 5000\n")
    with running_server(root, keys=None) as server:
        slowest, stop = 0.0, threading.Event()

        def poll() -> None:
            nonlocal slowest
            with httpx.Client(base_url=server.url, timeout=5) as http:
                while not stop.is_set():
                    started = time.perf_counter()
                    assert http.get("/healthz").status_code == 200
                    slowest = max(slowest, time.perf_counter() - started)
                    time.sleep(0.02)

        poller = threading.Thread(target=poll)
        poller.start()
        try:
            answer = httpx.post(f"{server.url}/v1/tools/h_progress_flood/call", json={"count": 30_000}, timeout=120)
        finally:
            stop.set()
            poller.join()
        log = server.log.read_text()
    assert answer.json()["error"]["code"] == "limit_exceeded", answer.text[:500]
    assert "Traceback" not in log, log[-3000:]
    assert slowest < MAX_GAP, slowest


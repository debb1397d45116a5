"""A ceiling on one call's work and memory (issue 28, item 2).

The review's finding: `POST /v1/tools/triageFeedback/call` with `"Bug. " × 40000` (200 KB, under
the body cap) took 27 s, grew the server by gigabytes and held `/healthz` for seconds. Now:
`limits.max_items` caps a forEach (a step's own `max_items` may only be lower), the events of
a run are capped by `limits.max_events_per_run`, a live run keeps only its newest events in
memory when there is a store (a late follower reads the rest from it), and a slow python skill
moves off the event loop. Real projects, a real SQLite file, the real service in a subprocess
for the finding itself.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine import ConfigError, Engine
from engine.cli.main import main
from server_helpers import parse_sse, running_server

REPO = Path(__file__).resolve().parents[2]

MODULE = '''
import asyncio
import threading
import time


def make(input):
    return [{"n": k} for k in range(input["count"])]


def double(input):
    return {"n": 2 * input["n"]}


def chatty(input, ctx):
    for k in range(input["count"]):
        ctx.progress(f"said {k + 1}", said=k + 1)
    return {"said": input["count"]}


async def chatty_with_a_pause(input, ctx):
    for k in range(input["count"]):
        ctx.progress(f"said {k + 1}", said=k + 1)
        if k + 1 == input["count"] // 2:
            await asyncio.sleep(input["pause"])
    return {"said": input["count"]}


def slow(input):
    time.sleep(input["seconds"])
    return {"thread": threading.current_thread().name}


async def where_async(input):
    return {"thread": threading.current_thread().name}
'''

SKILLS = """
skills:
  make:
    kind: python
    function: ceil_skills:make
    input: {type: object, properties: {count: {type: integer}}, required: [count]}
    output: {type: array, items: {type: object, properties: {n: {type: integer}}, required: [n]}}
  double:
    kind: python
    function: ceil_skills:double
    input: {type: object, properties: {n: {type: integer}}, required: [n]}
  chatty:
    kind: python
    function: ceil_skills:chatty
    input: {type: object, properties: {count: {type: integer}}, required: [count]}
  pausing:
    kind: python
    function: ceil_skills:chatty_with_a_pause
    input: {type: object, properties: {count: {type: integer}, pause: {type: number}}, required: [count, pause]}
  slow:
    kind: python
    function: ceil_skills:slow
    input: {type: object, properties: {seconds: {type: number}}, required: [seconds]}
  slowOnTheLoop:
    kind: python
    function: ceil_skills:slow
    threaded: false
    input: {type: object, properties: {seconds: {type: number}}, required: [seconds]}
  whereAsync:
    kind: python
    function: ceil_skills:where_async
    input: {type: object, properties: {seconds: {type: number}}, required: [seconds]}
"""


def _tool(name: str, workflow: str, **properties: str) -> str:
    props = ", ".join(f"{key}: {{type: {kind}}}" for key, kind in properties.items())
    return (f"  {name}:\n    description: {name}.\n    workflow: {workflow}\n"
            f"    parameters: {{type: object, properties: {{{props}}}, required: [{', '.join(properties)}]}}\n")


TOOLS = "tools:\n" + "".join([
    _tool("each", "each", count="integer"),
    _tool("eachOwn", "eachOwn", count="integer"),
    _tool("chatter", "chatter", count="integer"),
    _tool("chatterEach", "chatterEach", count="integer"),
    _tool("pausing", "pausing", count="integer", pause="number"),
    _tool("slow", "slow", seconds="number"),
    _tool("slowOnTheLoop", "slowOnTheLoop", seconds="number"),
    _tool("whereAsync", "whereAsync", seconds="number"),
])

WORKFLOWS = """
workflows:
  each:
    steps:
      - {id: make, skill: make, input: {count: $toolArgs.count}}
      - id: each
        skill: double
        forEach: $steps.make.output
        onItemError: skip
        input: {n: $item.n}
  eachOwn:
    steps:
      - {id: make, skill: make, input: {count: $toolArgs.count}}
      - id: each
        skill: double
        forEach: $steps.make.output
        max_items: 3
        input: {n: $item.n}
  chatter:
    steps:
      - {id: talk, skill: chatty, input: {count: $toolArgs.count}}
  chatterEach:
    steps:
      - {id: make, skill: make, input: {count: $toolArgs.count}}
      - id: talk
        skill: chatty
        forEach: $steps.make.output
        onItemError: skip
        input: {count: 30}
  pausing:
    steps:
      - {id: talk, skill: pausing, input: {count: $toolArgs.count, pause: $toolArgs.pause}}
  slow:
    steps:
      - {id: work, skill: slow, input: {seconds: $toolArgs.seconds}}
  slowOnTheLoop:
    steps:
      - {id: work, skill: slowOnTheLoop, input: {seconds: $toolArgs.seconds}}
  whereAsync:
    steps:
      - {id: work, skill: whereAsync, input: {seconds: $toolArgs.seconds}}
"""

ENGINE_YAML = """
limits:
  max_items: 5
  max_events_per_run: {events}
  python_thread_after: 10ms
"""


def _project(write_yaml_project: Any, events: int = 100, **more: str) -> Path:
    return write_yaml_project({
        "ceil_skills.py": MODULE, "skills.yaml": SKILLS, "tools.yaml": TOOLS, "workflows.yaml": WORKFLOWS,
        "config/engine.yaml": ENGINE_YAML.format(events=events), **more,
    })


def _seqs_gap_free(events: list[Any]) -> None:
    assert [event.seq for event in events] == list(range(1, len(events) + 1))


# ─── limits.max_items ──────────────────────────────────────────────────────────────────


def test_a_foreach_over_more_items_than_max_items_fails_naming_the_setting(write_yaml_project: Any,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(write_yaml_project)
    engine = Engine.from_dir(root)
    assert engine.call_tool_sync("each", {"count": 5}).data == [{"n": 2 * k} for k in range(5)]
    events: list[Any] = []
    result = engine.call_tool_sync("each", {"count": 6}, on_event=events.append)
    assert not result.ok and result.error is not None and result.error.code == "limit_exceeded"
    assert "forEach over 6 items, more than max_items 5 (limits.max_items in config/engine.yaml)" in result.error.message
    assert result.error.details == {"setting": "limits.max_items", "limit": 5}
    assert not [e for e in events if e.step_id == "each"]  # refused before any item ran (onItemError: skip or not)
    assert events[-1].type == "tool_call_error"
    assert "smaller request" in result.model_text()  # what a model reads back
    assert main(["call", "each", "--dir", str(root), "--arg", "count=6", "--no-store", "--quiet"]) == 1  # as timeout
    assert "error: limit_exceeded: step 'each': forEach over 6 items" in capsys.readouterr().err


def test_a_steps_own_max_items_is_lower_and_named(write_yaml_project: Any) -> None:
    engine = Engine.from_dir(_project(write_yaml_project))
    assert engine.call_tool_sync("eachOwn", {"count": 3}).ok
    result = engine.call_tool_sync("eachOwn", {"count": 4})
    assert result.error is not None and result.error.code == "limit_exceeded"
    assert "more than max_items 3 (the step's own max_items)" in result.error.message
    assert result.error.details == {"setting": "max_items", "limit": 3}


def test_a_steps_max_items_above_the_engines_is_a_load_error_at_its_line(write_yaml_project: Any) -> None:
    root = _project(write_yaml_project, **{"workflows.yaml": """
        workflows:
          each:
            steps:
              - {id: make, skill: make, input: {count: $toolArgs.count}}
              - id: each
                skill: double
                forEach: $steps.make.output
                max_items: 6
                input: {n: $item.n}
          eachOwn:
            steps:
              - id: make
                skill: make
                max_items: 2
                input: {count: $toolArgs.count}
    """})
    with pytest.raises(ConfigError) as caught:
        Engine.from_dir(root)
    text = str(caught.value)
    assert ("workflows.yaml:8:20: step 'each': max_items 6 is above the engine's limit of 5 items (limits.max_items) — "
            "lower it to 5 or less, or raise limits.max_items in config/engine.yaml") in text
    assert "workflows.yaml:14:20: step 'make': max_items applies to forEach steps only" in text


# ─── limits.max_events_per_run ─────────────────────────────────────────────────────────


def test_a_run_past_max_events_per_run_fails_naming_the_setting(write_yaml_project: Any) -> None:
    engine = Engine.from_dir(_project(write_yaml_project))
    assert engine.call_tool_sync("chatter", {"count": 10}).ok
    events: list[Any] = []
    result = engine.call_tool_sync("chatter", {"count": 500}, on_event=events.append)
    assert result.error is not None and result.error.code == "limit_exceeded"
    assert "the run emitted 100 events, its limit (limits.max_events_per_run in config/engine.yaml)" in result.error.message
    assert result.error.details == {"setting": "limits.max_events_per_run", "limit": 100}
    _seqs_gap_free(events)
    assert len(events) == 101 and events[-1].type == "tool_call_error"  # the cap, and the run's end past it


def test_the_event_cap_stops_a_foreach_whatever_on_item_error_says(write_yaml_project: Any) -> None:
    engine = Engine.from_dir(_project(write_yaml_project))
    events: list[Any] = []
    result = engine.call_tool_sync("chatterEach", {"count": 5}, on_event=events.append)  # 5 items × 33 events
    assert result.error is not None and result.error.code == "limit_exceeded"  # not `ok` with the items skipped
    assert result.error.details["setting"] == "limits.max_events_per_run"
    _seqs_gap_free(events)


def test_an_agent_run_past_the_cap_ends_with_its_reason(write_yaml_project: Any) -> None:
    root = _project(write_yaml_project, **{
        "config/models.yaml": "models:\n  script: {provider: scripted, options: {script: turns.yaml}}\n",
        "turns.yaml": """
            turns:
              - text: Let me talk.
                tool_calls:
                  - {id: call_a, name: chatter, arguments: {count: 500}}
              - text: Done.
        """,
    })
    engine = Engine.from_dir(root)
    events: list[Any] = []
    result = asyncio.run(engine.agent("script").run("go", on_event=events.append))
    assert result.stop_reason == "error" and "limits.max_events_per_run" in (result.error or "")
    assert result.tool_results[0].error is not None and result.tool_results[0].error.code == "limit_exceeded"
    _seqs_gap_free(events)
    assert [e.type for e in events[-2:]] == ["agent_error", "agent_done"]


# ─── a live run's events in memory: a bounded tail, the rest from the store ────────────


def _app(root: Path, tail: int) -> tuple[Any, Engine]:
    from engine.server import create_app

    engine = Engine.from_dir(root, store=True)
    app = create_app(engine, api_keys="", mcp=False)
    app.state.hub.tail = tail
    return app, engine


def _ids(text: str) -> list[int]:
    return [int(frame["id"]) for frame in parse_sse(text)]


def test_a_late_follower_gets_every_event_when_memory_kept_only_the_newest(write_yaml_project: Any) -> None:
    app, engine = _app(_project(write_yaml_project, events=1000), tail=16)

    async def main() -> tuple[str, str, list[dict[str, Any]], int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            call = await client.post("/v1/tools/chatter/call", json={"count": 200}, headers={"Accept": "text/event-stream"})
            run_id = call.headers["x-run-id"]
            held = len(app.state.hub.runs[run_id].records)
            replay = await client.get(f"/v1/runs/{run_id}/events", headers={"Accept": "text/event-stream"})
            listed = await client.get(f"/v1/runs/{run_id}/events?after=3", headers={"Accept": "application/json"})
            return call.text, replay.text, listed.json(), held

    try:
        streamed, replayed, listed, held = asyncio.run(main())
    finally:
        engine.close()
    ids = _ids(streamed)
    assert held == 16 and len(ids) > 200  # memory kept the newest 16 of the run's events
    assert ids == list(range(1, len(ids) + 1))  # the call's own stream: all but the newest came from the store
    assert parse_sse(streamed)[-1]["event"] == "tool_call_result"
    assert parse_sse(replayed) == parse_sse(streamed)
    assert [event["seq"] for event in listed] == ids[3:]


def test_a_follower_joining_mid_run_gets_the_stored_events_then_the_live_ones(write_yaml_project: Any) -> None:
    app, engine = _app(_project(write_yaml_project, events=1000), tail=16)

    async def main() -> tuple[list[int], list[bool]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            call = asyncio.create_task(client.post("/v1/tools/pausing/call", json={"count": 120, "pause": 0.5}))
            hub = app.state.hub
            for _ in range(200):  # until the run is in its pause, half of its events made
                await asyncio.sleep(0.01)
                live = next(iter(hub.runs.values()), None)
                if live is not None and live.last_seq >= 60:
                    break
            assert live is not None and not live.done and len(live.records) == 16
            follow = await client.get(f"/v1/runs/{live.run_id}/events", headers={"Accept": "text/event-stream"})
            assert (await call).json()["ok"]
            return _ids(follow.text), [live.done]

    try:
        ids, done = asyncio.run(main())
    finally:
        engine.close()
    assert ids == list(range(1, ids[-1] + 1)) and ids[-1] > 120 and done == [True]  # in order, gap-free, to the end


# ─── the event loop stays free ─────────────────────────────────────────────────────────


def test_a_slow_python_skill_moves_to_a_worker_thread(write_yaml_project: Any) -> None:
    engine = Engine.from_dir(_project(write_yaml_project))

    def threads(tool: str, calls: int) -> list[str]:
        return [engine.call_tool_sync(tool, {"seconds": 0.03}).data["thread"] for _ in range(calls)]

    moved = [name.rstrip("0123456789") for name in threads("slow", 4)]
    assert moved == ["MainThread", "MainThread", "skillyard-skill_", "skillyard-skill_"]  # after two slow calls
    assert threads("slowOnTheLoop", 3) == ["MainThread"] * 3  # `threaded: false`: the author's call
    assert threads("whereAsync", 3) == ["MainThread"] * 3  # an async skill stays on the loop


def test_a_foreach_of_items_that_never_wait_lets_the_loop_turn(write_yaml_project: Any) -> None:
    root = _project(write_yaml_project)
    (root / "config/engine.yaml").write_text("limits: {max_items: 1000}\n")
    engine = Engine.from_dir(root)

    async def main() -> list[int]:
        turns = 0
        stop = False

        async def ticker() -> None:
            nonlocal turns
            while not stop:
                turns += 1
                await asyncio.sleep(0)

        seen: list[int] = []
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        result = await engine.call_tool("each", {"count": 500},
                                        on_event=lambda e: seen.append(turns) if e.data.get("stage") == "item_finished" else None)
        stop = True
        await task
        assert result.ok
        return seen

    seen = asyncio.run(main())
    from engine.executors.workflow_nodes import YIELD_EVERY

    assert len(seen) == 500
    stretches = [len(list(group)) for _, group in itertools.groupby(seen)]  # items done between two turns
    assert len(stretches) > 1 and max(stretches) <= 4 * YIELD_EVERY  # (concurrency 4); before: all 500 in one


# ─── the finding itself, through the real service ──────────────────────────────────────


@pytest.mark.slow
def test_the_reviewed_request_is_refused_at_once_and_health_stays_fast(tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")
    for name in ("tools.yaml", "skills.yaml", "workflows.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "capabilities", tmp_path / "capabilities", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "config", tmp_path / "config")
    with running_server(tmp_path, keys=None) as server:
        process = psutil.Process(server.process.pid)
        assert httpx.post(f"{server.url}/v1/tools/triageFeedback/call", json={"text": "Bug. x"}, timeout=60).json()["ok"]
        idle = process.memory_info().rss
        peak, slowest, stop = [idle], [0.0], threading.Event()

        def watch() -> None:
            with httpx.Client(timeout=30) as client:
                while not stop.is_set():
                    started = time.perf_counter()
                    assert client.get(f"{server.url}/healthz").status_code == 200
                    slowest[0] = max(slowest[0], time.perf_counter() - started)
                    peak[0] = max(peak[0], process.memory_info().rss)
                    time.sleep(0.01)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            time.sleep(0.1)
            started = time.perf_counter()
            answer = httpx.post(f"{server.url}/v1/tools/triageFeedback/call", json={"text": "Bug. " * 40000}, timeout=120)
            took = time.perf_counter() - started
            time.sleep(0.2)
        finally:
            stop.set()
            watcher.join()
    assert answer.status_code == 422, answer.text[:300]
    error = answer.json()["error"]
    assert error["code"] == "limit_exceeded" and error["details"] == {"setting": "limits.max_items", "limit": 1000}
    assert "step 'classify': forEach over 40000 items, more than max_items 1000" in error["message"]
    assert took < 5  # it took 27 s
    assert peak[0] - idle < 200 * 2**20  # it took 2.3 GB more
    assert slowest[0] < 0.25  # /healthz answered in up to 7 s meanwhile
    assert sum(path.stat().st_size for path in (tmp_path / ".skillyard").glob("runs.db*")) < 20 * 2**20  # it grew by 188 MB

"""Ready rows and the record encoded once (issue 11 §1).

The Run encodes each event's data once (`Event.data_json`) when a record sink listens — the
store, the SSE hub, `--output events` — and never otherwise; the store writes plain column
values made from it and computes the implied rows in Python, with the same stored results.
"""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path
from typing import Any

import pytest

from engine import Engine
from engine.link.linker import load_project
from engine.runtime.events import Event, encode_data, record_sink
from engine.server.sse import event_frames, stored_frames
from engine.store import open_store
from engine.store.ready import RowMaker
from engine.store.rows import Batch
from store_support import write_project
from test_store_backends import engine_on, project, sql, url  # noqa: F401 - fixtures


class Counted:
    """A value JSON cannot hold: written as its str(), which counts how often it is encoded."""

    calls = 0

    def __str__(self) -> str:
        Counted.calls += 1
        return "counted"


def _emit_in_a_run(engine: Engine, on_event: Any, data: dict[str, Any]) -> Event:
    async def main() -> Event:
        run, queued = engine.open_run("run_once", on_event)
        event = run.emit("tool_progress_delta", data, "call_1")
        engine.end_run(run, "ok")
        for listener in queued:
            await listener.close()
        return event

    return asyncio.run(main())


def test_the_run_encodes_the_data_once_for_every_sink(tmp_path: Path) -> None:
    engine = Engine.from_project(load_project(write_project(tmp_path / "project")), store=tmp_path / "runs.db")
    lines: list[bytes] = []
    Counted.calls = 0
    event = _emit_in_a_run(engine, record_sink(lambda e: lines.append(e.json())), {"value": Counted(), "n": 1})
    engine.close()
    assert Counted.calls == 1, "store and line share one encoding"
    assert event.data_json == b'{"value":"counted","n":1}'
    assert json.loads(lines[0]) == {**event.to_dict(), "data": {"value": "counted", "n": 1}}
    assert sql(f"sqlite:///{tmp_path}/runs.db", "SELECT data, typeof(data), json_extract(data, '$.n') FROM events "
               "WHERE run_id = 'run_once'") == [('{"value":"counted","n":1}', "text", 1)], "SQLite made the bytes JSON text"


def test_a_run_without_a_record_sink_encodes_nothing(tmp_path: Path) -> None:
    engine = Engine.from_project(load_project(write_project(tmp_path / "project")))
    Counted.calls = 0
    event = _emit_in_a_run(engine, [].append, {"value": Counted()})
    engine.close()
    assert Counted.calls == 0 and event.data_json is None


@pytest.mark.parametrize("data", [
    {"text": "héllo \"q\"\n", "n": 0.1 + 0.2, "deep": [{"a": None}]},
    {1: "a non-string key", "big": 2**40},
    {"n": 10**30},  # no fast encoding: the fallback
    {"t": "a\ud800b"},  # a lone surrogate: the escaped fallback
])
def test_an_sse_frame_is_the_frame_of_the_event_dict(data: dict[str, Any]) -> None:
    event = Event("skill_result", "run_1", 3, 7, "call_1", "s1", "sk", data)
    event = event._replace(data_json=encode_data(data))
    assert event_frames([event]) == stored_frames([event.to_dict()])  # live and stored: the same bytes
    if event.data_json is not None:
        assert json.loads(event.json()) == json.loads(json.dumps(event.to_dict(), default=str))


def test_a_tool_log_whose_call_started_in_another_process_finds_its_start(url: str) -> None:  # noqa: F811
    start = Event("tool_call_start", "run_split", 1, 10, "call_1", data={"tool": "report", "arguments": {"text": "a"}})
    end = Event("tool_call_result", "run_split", 2, 20, "call_1", data={"ok": True, "data": {"n": 1}, "metadata": {"duration_ms": 2}})
    with open_store(url) as first:
        first.listener(start)
    with open_store(url) as second:  # knows nothing of the start but what is stored
        second.listener(end)
        second.flush()
        (log,) = second.tool_logs(run_id="run_split")
        run = second.run("run_split")
    assert (log["tool"], json.loads(log["input"]), log["output"], log["status"]) == ("report", {"text": "a"}, '{"n":1}', "success")
    assert run is not None and (run.status, run.output, run.finished_at) == ("ok", {"n": 1}, 20)


def test_a_lone_surrogate_in_an_id_is_replaced_and_loses_no_other_run(url: str) -> None:  # noqa: F811
    def encoded(event: Event) -> Event:  # as a Run delivers them to a store that takes redacted events
        return event._replace(data_json=encode_data(event.data))

    with open_store(url, redacted_events=True) as store:
        store.listener(encoded(Event("tool_call_start", "run_bad", 1, 1, "call_\ud800", data={"tool": "t", "arguments": {}})))
        store.listener(encoded(Event("tool_call_start", "run_good", 1, 1, "call_1", data={"tool": "t", "arguments": {"x": 1}})))
        store.flush()
        assert store.write_failures == {"lone_surrogate": 1}
        assert store.run("run_good").input == {"x": 1} and store.run("run_bad") is not None
        assert store.events("run_bad")[0]["tool_call_id"] == "call_\ufffd"


def test_pending_rows_are_a_handful_of_objects_whatever_their_number(tmp_path: Path) -> None:
    """Rows kept as tuples until the writer commits them set off the garbage collector's
    full collections (long pauses of the event loop); a spill keeps them in flat lists."""
    events = [Event("tool_progress_delta", f"run_{i // 50}", i % 50 + 1, 1, "call_1", data={"n": i}) for i in range(2_000)]
    events = [event._replace(data_json=encode_data(event.data)) for event in events]
    with open_store(f"sqlite:///{tmp_path}/runs.db", redacted_events=True) as store:
        rows = RowMaker(store.database, store.failures)
        growth = []
        for _ in range(3):  # other threads (the writer, earlier tests' notice threads) may allocate meanwhile:
            gc.collect()  # the least growth of three tries is this spill's own
            gc.disable()
            try:
                before = len(gc.get_objects())
                batch = rows.ready(events)
                growth.append(len(gc.get_objects()) - before)
            finally:
                gc.enable()
        assert batch.count == 2_000 and len(batch.events) == 16_000
        assert min(growth) <= 5, f"{growth} tracked objects for 2,000 rows"


def test_a_batch_retried_after_a_transient_error_keeps_its_implied_rows(tmp_path: Path) -> None:
    """SQLite retries a batch that failed with a transient error: the run and its tool log
    are written by the retry too (the implied rows are made again for each attempt)."""
    calls = []

    def fail_once() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a transient failure")
        return 0

    with open_store(f"sqlite:///{tmp_path}/runs.db") as store:
        store.database._write.create_function("fail_once", 0, fail_once)  # the writer thread's connection
        store.database._write.execute("CREATE TEMP TRIGGER fail_first AFTER INSERT ON tool_logs BEGIN SELECT fail_once(); END")
        store.listener(Event("tool_call_start", "run_retry", 1, 10, "call_1", data={"tool": "report", "arguments": {"a": 1}}))
        store.listener(Event("tool_call_result", "run_retry", 2, 20, "call_1", data={"ok": True, "data": 1}))
        store.flush()
        assert len(calls) == 2, "failed once, then written"
        run = store.run("run_retry")
        assert run is not None and run.status == "ok" and [log["tool"] for log in store.tool_logs()] == ["report"]


def test_a_builtin_becomes_a_record_sink_wrapped() -> None:
    seen: list[Event] = []
    sink = record_sink(seen.append)
    assert sink.wants_records and sink(Event("agent_start", "run_1", 1, 1)) is None and len(seen) == 1


def test_the_writer_threads_cpu_is_measured_apart(tmp_path: Path) -> None:
    """bench.store splits the store's CPU between the event loop and the writer thread: the
    writer's own clock grows with what it writes, and says None once the writer is gone."""
    store = open_store(f"sqlite:///{tmp_path}/runs.db")
    before = store.writer_cpu()
    assert before is not None and before >= 0
    for run in range(300):
        store.listener(Event("tool_call_start", f"run_{run}", 1, 10, "call_1", data={"tool": "report", "arguments": {"a": run}}))
        store.listener(Event("tool_call_result", f"run_{run}", 2, 20, "call_1", data={"ok": True, "data": "x" * 2_000}))
    store.flush()
    after = store.writer_cpu()
    assert after is not None and after > before, "writing 600 events took the writer some CPU"
    assert len(store.runs(limit=1_000)) == 300
    store.close()
    assert store.writer_cpu() is None


def test_spilled_parts_joined_are_the_batch_of_all_their_events(tmp_path: Path) -> None:
    """The writer joins the parts that several spills made into one transaction's batch: the
    same rows, implied rows pointing at their own events, and once written the same runs as
    if spilled at once. A run that starts and ends within one part is one finished row; a run
    cut by a part's end is opened, then ended by a statement of its own."""
    events = []
    for run in range(40):
        events.append(Event("tool_call_start", f"run_{run}", 1, 10, "call_1", data={"tool": "report", "arguments": {"n": run}}))
        events.append(Event("tool_progress_delta", f"run_{run}", 2, 11, "call_1", data={"stage": "x"}))
        events.append(Event("tool_call_result", f"run_{run}", 3, 12, "call_1", data={"ok": True, "data": run}))
    events = [event._replace(data_json=encode_data(event.data)) for event in events]
    stored = {}
    for how in ("whole", "parts"):
        with open_store(f"sqlite:///{tmp_path}/{how}.db", redacted_events=True) as store:
            rows = RowMaker(store.database, store.failures)  # the writer's own part, fed here directly
            if how == "whole":
                batch = rows.ready(events)
                assert [name for name, _, _ in batch.each_implied()] == ["run_start", "tool_log"] * 40
            else:
                batch = Batch.joined([rows.ready(events[at : at + 50]) for at in range(0, len(events), 50)])
            store.database.write_rows(batch)
            stored[how] = ([run.to_dict() for run in store.runs(limit=100)], [{**log, "id": 0} for log in store.tool_logs(limit=100)],
                           [store.events(f"run_{run}") for run in range(40)], batch)
    whole, parts = stored["whole"][3], stored["parts"][3]
    assert (parts.count, parts.events) == (whole.count, whole.events)
    assert [index for name, index, _ in parts.each_implied() if name == "tool_log"] == [3 * run + 2 for run in range(40)]
    flat = dict(parts.implied_flat())
    assert list(flat) == ["run_start", "tool_log", "tool_end"]  # runs 16 and 33 are cut: events 48-50, 99-101
    assert flat["tool_end"] == ["ok", 12, "16", None, "null", "run_16", "call_1", "ok", 12, "33", None, "null", "run_33", "call_1"]
    assert stored["whole"][:3] == stored["parts"][:3]
    assert {run["status"] for run in stored["whole"][0]} == {"ok"} and len(stored["whole"][0]) == 40

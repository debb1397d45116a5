"""A run handed to the store whole keeps its events in its own row (packing.py).

What must hold: `Store.events` and the `events` view give exactly what one row per event gave
(the same dicts as the live events, the same column values and data text), whether a run was
packed, written as rows, or packed and then given a later event; a packed run's events go
with it when pruned; and the engine really hands over and packs the runs of an ordinary
call. A run in flight waits in its list for its end (HOLD_BACK_MS at most, never past a
flush()), so that it is packed whole.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from engine import Engine
from engine.runtime.events import Event, encode_data
from engine.store import RunStore
from engine.store.packing import HOLD_BACK_MS
from engine.store.ready import RowMaker
from store_support import query, write_project

_COLUMNS = "run_id, seq, type, ts, tool_call_id, step_id, skill, data"


def _events(run_id: str, data: dict[str, Any] | None = None) -> list[Event]:
    made = [Event("tool_call_start", run_id, 1, 10, "call_1", data={"tool": "t", "arguments": {"q": "é \u2028 \"x\""}}),
            Event("step_start", run_id, 2, 11, "call_1", "s1", "k", data=data or {"n": 1.5, "none": None}),
            Event("tool_call_result", run_id, 3, 12, "call_1", data={"ok": True, "data": ["a", {"b": []}]})]
    return [event._replace(data_json=encode_data(event.data)) for event in made]


def _write(store: RunStore, *batches: list[Event]) -> None:
    """Each batch as events that came one by one (rows)."""
    rows = RowMaker(store.database, store.failures)
    for events in batches:
        store.database.write_rows(rows.ready(events))


def _write_run(store: RunStore, events: list[Event]) -> None:
    """A run handed over whole (take_run), in one batch."""
    store.database.write_rows(RowMaker(store.database, store.failures).ready([], [events]))


_ERROR_END = Event("tool_call_error", "run_p", 3, 12, "call_1",
                   data={"error": {"code": "timeout", "message": "slow"}, "metadata": {"duration_ms": 7, "usage": {"n": 1}}})


@pytest.mark.parametrize("ending", ["result", "error"])
def test_a_run_within_one_batch_is_packed_and_reads_back_as_rows_did(tmp_path: Path, ending: str) -> None:
    """The run's row and tool log, made in one step for a whole run, are what the events make one by one."""
    packed_db, rows_db = tmp_path / "packed.db", tmp_path / "rows.db"
    events = _events("run_p")
    if ending == "error":
        events[2] = _ERROR_END._replace(data_json=encode_data(_ERROR_END.data))
    with RunStore(packed_db, redacted_events=True) as store:
        _write_run(store, events)
        assert store.events("run_p") == [event.to_dict() for event in events]
        assert store.events("run_p", after_seq=2) == [events[2].to_dict()]
    with RunStore(rows_db, redacted_events=True) as store:
        _write(store, events[:1], events[1:])  # as rows: the run's row is opened, then ended
        assert store.events("run_p") == [event.to_dict() for event in events]
    assert query(packed_db, "SELECT count(*) FROM event_rows") == [(0,)]
    assert query(packed_db, "SELECT packed_events IS NOT NULL FROM runs") == [(1,)]
    assert query(rows_db, "SELECT count(*), max(packed_events) FROM event_rows, runs") == [(3, None)]
    view = f"SELECT {_COLUMNS}, typeof(step_id), typeof(data) FROM events ORDER BY seq"
    assert query(packed_db, view) == query(rows_db, view)  # the same values, the same data text
    run = "SELECT id, kind, name, status, started_at, finished_at, input, output, error, usage FROM runs"
    assert query(packed_db, run) == query(rows_db, run)
    log = "SELECT run_id, tool_call_id, tool, input, output, status, error_message, duration_ms, created_at FROM tool_logs"
    assert query(packed_db, log) == query(rows_db, log) and len(query(packed_db, log)) == 1


def test_an_event_after_the_batch_that_packed_its_run_follows_the_packed_ones(tmp_path: Path) -> None:
    late = Event("skill_progress_delta", "run_p", 4, 13, "call_1", "s1", "k", data={"text": "late"})
    late = late._replace(data_json=encode_data(late.data))
    with RunStore(tmp_path / "runs.db", redacted_events=True) as store:
        _write_run(store, _events("run_p"))
        _write(store, [late])
        assert [e["seq"] for e in store.events("run_p")] == [1, 2, 3, 4]
        assert store.events("run_p", after_seq=3) == [late.to_dict()]
    assert query(tmp_path / "runs.db", "SELECT seq FROM events WHERE run_id = 'run_p' ORDER BY seq") == [(1,), (2,), (3,), (4,)]


def test_a_run_with_data_no_fast_encoder_writes_goes_as_rows_with_its_fallback_text(tmp_path: Path) -> None:
    """A 70-digit integer: the Run has no encoded data, the store's fallback writes the text."""
    big = 10**70
    events = [event._replace(data_json=None) if event.seq == 2 else event for event in _events("run_b", {"n": big})]
    with RunStore(tmp_path / "runs.db", redacted_events=True) as store:
        _write_run(store, events)
        assert store.events("run_b")[1]["data"] == {"n": big}
    assert query(tmp_path / "runs.db", "SELECT data FROM events WHERE seq = 2") == [(f'{{"n":{big}}}',)]
    assert query(tmp_path / "runs.db", "SELECT count(*), max(packed_events) FROM event_rows, runs") == [(3, None)]


def test_a_run_missing_events_goes_as_rows(tmp_path: Path) -> None:
    """Events 2 … stored elsewhere (a Temporal worker's): the list holds 1 and 3 only."""
    events = _events("run_gap")
    with RunStore(tmp_path / "runs.db", redacted_events=True) as store:
        _write(store, events[1:2])
        _write_run(store, [events[0], events[2]])
        assert [e["seq"] for e in store.events("run_gap")] == [1, 2, 3]
    assert query(tmp_path / "runs.db", "SELECT count(*), max(packed_events) FROM event_rows, runs") == [(3, None)]


def test_pruning_a_packed_run_removes_its_events(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db", redacted_events=True) as store:
        _write_run(store, _events("run_old"))
        assert store.prune(older_than_ms=0) == 1
        assert store.events("run_old") == [] and store.run("run_old") is None
    assert query(tmp_path / "runs.db", "SELECT count(*) FROM events") == [(0,)]


def test_the_engine_packs_an_ordinary_call_and_the_stored_events_are_the_live_ones(tmp_path: Path) -> None:
    project, db = write_project(tmp_path / "project"), tmp_path / "runs.db"
    engine = Engine.from_dir(project, store=db)
    seen: list[dict[str, Any]] = []
    try:
        result = asyncio.run(engine.call_tool("report", {"text": "one two three"}, on_event=lambda e: seen.append(e.to_dict())))
        assert result.ok, result.error
        engine.store.flush()  # type: ignore[union-attr]
        stored = engine.store.events(result.run_id)  # type: ignore[union-attr]
    finally:
        engine.close()
    assert stored == json.loads(json.dumps(seen)) and len(stored) > 3
    assert query(db, "SELECT count(*) FROM event_rows WHERE run_id = ?", (result.run_id,)) == [(0,)]
    packed = query(db, "SELECT status, packed_events FROM runs WHERE id = ?", (result.run_id,))[0]
    assert packed[0] == "ok" and [event[0] for event in json.loads(packed[1])] == list(range(1, len(stored) + 1))


def test_a_run_in_flight_waits_for_its_end_and_is_packed_whole(tmp_path: Path) -> None:
    """The writer spills every 50 ms: the run's first two events wait through several spills.
    (Its start is set 5 s ahead: a stalled machine cannot age it past HOLD_BACK_MS here.)"""
    start, step, end = _events("run_now")
    with RunStore(tmp_path / "runs.db", redacted_events=True) as store:
        events = store.open_buffer()
        events.opened_ms += 5_000
        events.append(start)
        events.append(step)
        time.sleep(0.15)
        assert store.queue_depth == 2 and store.events("run_now") == []
        events.append(end)
        store.take_run(events)
        store.flush()
        assert [e["seq"] for e in store.events("run_now")] == [1, 2, 3]
        assert store.receives(events.append) and store.receives(store.listener) and not store.receives(print)
    assert query(tmp_path / "runs.db", "SELECT count(*) FROM event_rows") == [(0,)]
    assert query(tmp_path / "runs.db", "SELECT status, packed_events IS NOT NULL FROM runs") == [("ok", 1)]


def test_a_longer_run_is_written_as_it_goes_and_a_flush_holds_nothing_back(tmp_path: Path) -> None:
    start, step, end = _events("run_older")
    with RunStore(tmp_path / "runs.db", redacted_events=True) as store:
        older = store.open_buffer()
        older.opened_ms -= HOLD_BACK_MS + 1_000
        older.append(start)
        older.append(step)
        deadline = time.monotonic() + 10
        while store.queue_depth and time.monotonic() < deadline:  # the writer's next spill takes it
            time.sleep(0.02)
        assert [e["seq"] for e in store.events("run_older")] == [1, 2]
        older.append(end)
        store.take_run(older)  # the rest of a run already begun goes as rows
        recent = store.open_buffer()
        recent.append(_events("run_recent")[0])
        store.flush()  # writes what was recorded before it returns, whatever the run
        assert [e["seq"] for e in store.events("run_older")] == [1, 2, 3]
        assert [e["seq"] for e in store.events("run_recent")] == [1]
        assert store.run("run_recent").status == "running"  # type: ignore[union-attr]
        assert store.run("run_older").status == "ok"  # type: ignore[union-attr]
    assert query(tmp_path / "runs.db", "SELECT count(*) FROM event_rows") == [(4,)]
    assert query(tmp_path / "runs.db", "SELECT count(packed_events) FROM runs") == [(0,)]


def test_a_run_that_emitted_nothing_costs_the_others_nothing(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db", redacted_events=True) as store:
        empty, whole = store.open_buffer(), store.open_buffer()
        whole.extend(_events("run_whole"))
        store.take_run(empty)
        store.take_run(whole)
        store.flush()
        assert [e["seq"] for e in store.events("run_whole")] == [1, 2, 3]
        assert store.write_failures == {} and store.queue_depth == 0

"""The store's parts and their seams (issue 29 §2): redaction once, events read by field name,
one interface for the dialects, side writes kept by the writer while the database is locked.

The Store is a face over parts that each do one job (engine/store/base.py); these tests pin
what the split promised beside the behaviour the other store tests already hold.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import time
from collections import namedtuple
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import engine.runtime.events as events_module
from engine import Engine
from engine.link.linker import load_project
from engine.runtime.events import Event, encode_data
from engine.safety.redaction import REDACTED, Redactor
from engine.store import RunStore
from engine.store import sqlite as store_sqlite
from engine.store.database import Database
from engine.store.packing import pack_run
from engine.store.ready import RowMaker
from engine.store.redacting import RedactingListener
from store_support import SECRETS, query, write_project


class CountingRedactor(Redactor):
    """A real Redactor that counts the per-run scrubbers it makes (each is a pass of redaction)."""

    def __init__(self) -> None:
        super().__init__()
        self.scrubbers = 0

    def for_run(self) -> Any:
        self.scrubbers += 1
        return super().for_run()


def test_an_engines_runs_are_redacted_by_their_run_and_not_again_by_the_store(tmp_path: Path) -> None:
    """A store not told that its events come redacted (`redacted_events` left False) used to
    redact an Engine's runs a second time in its writer. The Run redacts them; the store
    redacts only what is fed to it by hand, at its entry."""
    redactor = CountingRedactor()
    store = RunStore(tmp_path / "runs.db", redactor=redactor)
    engine = Engine(load_project(write_project(tmp_path / "project")), store=store)
    try:
        result = engine.call_tool_sync("login", {"user": "ann", **SECRETS})
        store.flush()
        assert result.ok, result.error
        assert redactor.scrubbers == 0, "the store redacted a run its Run had redacted"
        run = store.run(result.run_id)
        assert run is not None and run.input == {"user": "ann", "password": REDACTED, "api_key": REDACTED,
                                                 "accessToken": REDACTED}

        assert isinstance(store.listener, RedactingListener)
        arguments = {"password": SECRETS["password"], "note": f"it is {SECRETS['password']}"}
        store.listener(Event("tool_call_start", "run_hand", 1, 1, "call_1", data={"tool": "t", "arguments": arguments}))
        store.flush()
        assert redactor.scrubbers == 1, "an event fed by hand is redacted once, at the entry"
        stored = store.events("run_hand")[0]["data"]["arguments"]
        assert stored == {"password": REDACTED, "note": f"it is {REDACTED}"}
    finally:
        engine.close()


def test_a_store_told_its_events_come_redacted_hands_them_to_the_writer_as_they_are(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db", redacted_events=True) as store:
        assert store.listener is store.writer.listener and store.receives(store.listener)
        assert store.listener.wants_records  # the runs it hears encode their data once, for it


def _fresh(name: str, event_type: type, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A new copy of engine.store.<name>, made while `Event` is `event_type` (the module itself stays)."""
    spec = importlib.util.find_spec(f"engine.store.{name}")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with monkeypatch.context() as patched:
        patched.setattr(events_module, "Event", event_type)
        spec.loader.exec_module(module)
    return module


def test_an_event_is_read_by_field_name_so_a_new_field_moves_no_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ready rows and packed runs read an event's fields by name: an Event with one more field
    in front (every position moved by one) gives the same rows, the same packed text."""
    wider = namedtuple("wider", ["added", *Event._fields])  # type: ignore[misc]
    made = [Event("tool_call_start", "run_a", 1, 10, "call_1", data={"tool": "t", "arguments": {"q": 1}}),
            Event("skill_start", "run_a", 2, 11, "call_1", "s1", "k", data={"input": {"q": 1}}),
            Event("tool_call_result", "run_a", 3, 12, "call_1", data={"ok": True, "data": ["a"]})]
    encoded = [event._replace(data_json=encode_data(event.data)) for event in made]
    ready = _fresh("ready", wider, monkeypatch)
    with RunStore(tmp_path / "runs.db", redacted_events=True) as store:
        for events in (encoded, [*encoded[:2], made[2]]):  # data encoded by the Run; one event without (row by row)
            expected = RowMaker(store.database, store.failures).ready(list(events))
            got = ready.RowMaker(store.database, store.failures).ready([wider("x", *event) for event in events])
            assert (got.count, list(got.events), list(got.implied)) == (expected.count, list(expected.events),
                                                                         list(expected.implied))
    assert pack_run([wider("x", *event) for event in encoded]) == pack_run(encoded) is not None


def test_every_dialect_fills_in_the_one_interface() -> None:
    """What `Database` leaves to a dialect, SQLite and PostgreSQL both give."""
    pytest.importorskip("psycopg")
    from engine.store.postgres import PostgresDatabase

    required = {name for name, value in vars(Database).items() if callable(value) and _raises_not_implemented(value)}
    assert required >= {"write_rows", "write_side", "fetch", "transaction", "close"}
    for dialect in (store_sqlite.SqliteDatabase, PostgresDatabase):
        missing = {name for name in required if getattr(dialect, name) is getattr(Database, name)}
        assert not missing, (dialect.__name__, missing)


def _raises_not_implemented(function: Any) -> bool:
    return "NotImplementedError" in function.__code__.co_names


def test_a_side_write_locked_out_is_kept_and_written_without_a_false_alarm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An approval recorded while another process holds the write lock waits in the writer and
    is written once the lock is free; nothing was lost, so flush() reports nothing."""
    monkeypatch.setattr(store_sqlite, "BUSY_TIMEOUT_MS", 30)  # the writer's connection gives up quickly
    db = tmp_path / "runs.db"
    with RunStore(db) as store:
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            store.set_approval("run_locked", "call_1", "pending")  # wakes the writer now: its attempt meets the lock
            time.sleep(0.3)
            assert query(db, "SELECT status FROM approvals") == []
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        store.flush()
        assert store.pending_approvals("run_locked") == ["call_1"]
        assert store.write_failures == {}

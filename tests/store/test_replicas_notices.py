"""Which store notices a service listens to (engine/server/replicas.py): a SQLite store's
event notices are delivered in this process only and tell of this process's own runs, which
its hub follows, so the service does not take them (a thread hop and a call per run per commit
for nothing); a store whose notices cross processes (PostgreSQL) is heard on both channels."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from engine.server.replicas import CONTROL_CHANNEL, Replicas  # noqa: E402
from engine.store.schema import EVENTS_CHANNEL  # noqa: E402

ROUTER = Path(__file__).resolve().parents[1] / "projects" / "router"


class _SharedStore:
    notices_cross_processes = True

    def __init__(self) -> None:
        self.channels: list[str] = []

    def listen(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        self.channels.append(channel)
        return lambda: None


def _started(engine: Any) -> Replicas:
    async def main() -> Replicas:
        replicas = Replicas(engine)
        replicas.start()
        return replicas

    return asyncio.run(main())


def test_a_sqlite_service_hears_control_notices_only(tmp_path: Path) -> None:
    engine = Engine.from_dir(ROUTER, store=tmp_path / "runs.db")
    try:
        assert engine.store is not None and not engine.store.notices_cross_processes
        replicas = _started(engine)
        listening = engine.store.notices.channels()
        assert CONTROL_CHANNEL in listening and EVENTS_CHANNEL not in listening
        replicas.stop()
    finally:
        engine.close()


def test_a_shared_store_is_heard_on_both_channels() -> None:
    store = _SharedStore()
    engine = type("E", (), {"store": store})()
    _started(engine)
    assert sorted(store.channels) == sorted([CONTROL_CHANNEL, EVENTS_CHANNEL])

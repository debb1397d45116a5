"""The hub follows each run by a listener of the run's own (`LiveRun.arrive`, given as the run
opens): it keeps the event and wakes a follower that waits. Events reach a follower in seq order, once each, when a worker thread emits them, when
one overtakes another, and when the run was opened by another thread's loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from engine import Engine  # noqa: E402
from engine.runtime.events import Event, new_event  # noqa: E402
from engine.server.hub import LiveRun, RunHub  # noqa: E402

ROUTER = Path(__file__).resolve().parents[1] / "projects" / "router"


def _progress(run: Any, n: int) -> None:
    run.emit("tool_progress_delta", {"n": n})


async def _collect(live: LiveRun, after: int = 0) -> list[int]:
    """The seqs a follower gets (frames parsed for their `id:`), to the run's end."""
    seqs: list[int] = []
    async for chunk in live.follow(after, heartbeat=5):
        assert chunk is not None, "the follower waited a whole heartbeat: a wake-up was lost"
        seqs += [int(line[4:]) for line in bytes(chunk).decode().splitlines() if line.startswith("id: ")]
    return seqs


def _event(run_id: str, seq: int) -> Event:
    return new_event(Event, ("tool_progress_delta", run_id, seq, 0, None, None, None, {"n": seq}, None, b'{"n":%d}' % seq))


@pytest.fixture
def engine() -> Engine:
    return Engine.from_dir(ROUTER)


def test_a_follower_gets_every_event_live_in_order(engine: Engine) -> None:
    async def main() -> tuple[list[int], int]:
        hub = RunHub(engine)
        hub.attach()
        run, _ = engine.open_run("run_follow", kind="tool", name="t")
        live = hub.runs["run_follow"]
        _progress(run, 1)
        follower = asyncio.create_task(_collect(live))
        for n in range(2, 6):
            await asyncio.sleep(0.01)  # the follower waits between events
            _progress(run, n)
        engine.end_run(run, "ok")
        seqs = await asyncio.wait_for(follower, 5)
        await hub.detach()
        return seqs, live.last_seq

    seqs, last = asyncio.run(main())
    assert seqs == [1, 2, 3, 4, 5] and last == 5


def test_events_from_a_worker_thread_wake_the_follower(engine: Engine) -> None:
    async def main() -> list[int]:
        hub = RunHub(engine)
        hub.attach()
        run, _ = engine.open_run("run_thread", kind="tool", name="t")
        follower = asyncio.create_task(_collect(hub.runs["run_thread"]))
        await asyncio.sleep(0.01)  # the follower is waiting

        def work() -> None:
            for n in range(1, 4):
                _progress(run, n)
                threading.Event().wait(0.01)

        await asyncio.to_thread(work)
        await asyncio.sleep(0.05)
        assert not follower.done()
        engine.end_run(run, "ok")
        seqs = await asyncio.wait_for(follower, 5)
        await hub.detach()
        return seqs

    assert asyncio.run(main()) == [1, 2, 3]


def test_an_event_that_overtakes_another_waits_for_it() -> None:
    live = LiveRun("run_order", "tool", "t")
    live.records += [_event("run_order", 1), _event("run_order", 3)]  # 2 is numbered, on its way
    assert live.last_seq == 1 and [e["seq"] for e in live.events] == [1]
    live.records += [_event("run_order", 2), _event("run_order", 2), _event("run_order", 4)]  # and a repeat
    assert live.last_seq == 4 and [e["seq"] for e in live.events] == [1, 2, 3, 4]
    assert [frame.split(b"\n")[0] for frame in live.frames] == [b"id: %d" % n for n in (1, 2, 3, 4)]


def test_a_run_opened_by_another_threads_loop_is_followed(engine: Engine) -> None:
    async def main() -> tuple[list[int], str]:
        hub = RunHub(engine)
        hub.attach()

        def elsewhere() -> None:
            async def run_there() -> None:
                run, _ = engine.open_run("run_elsewhere", kind="tool", name="there")
                for n in range(1, 4):
                    _progress(run, n)
                engine.end_run(run, "ok")

            asyncio.run(run_there())

        await asyncio.to_thread(elsewhere)
        for _ in range(100):  # its events come to the loop one call_soon_threadsafe each
            await asyncio.sleep(0.01)
            live = hub.runs.get("run_elsewhere")
            if live is not None and live.last_seq == 3:
                break
        assert live is not None
        seqs = await asyncio.wait_for(_collect(live), 5)
        await hub.detach()
        return seqs, live.name

    seqs, name = asyncio.run(main())
    assert seqs == [1, 2, 3] and name == "there"


def test_a_run_with_no_follower_ends_with_its_events_in_memory(engine: Engine) -> None:
    async def main() -> LiveRun:
        hub = RunHub(engine)
        hub.attach()
        run, _ = engine.open_run("run_quiet", kind="tool", name="t")
        for n in range(1, 4):
            _progress(run, n)
        engine.end_run(run, "ok")
        await hub.detach()
        return hub.runs["run_quiet"]

    live = asyncio.run(main())
    assert live.done and live.status == "ok" and live.last_seq == 3
    assert [e["data"]["n"] for e in live.events] == [1, 2, 3]


def test_a_follower_waiting_before_the_run_opens_is_woken_by_its_events(engine: Engine) -> None:
    async def main() -> list[tuple[int, bool]]:
        hub = RunHub(engine)
        hub.attach()
        opened = asyncio.Event()

        async def work() -> None:
            await opened.wait()  # the follower waits before the Run exists
            run, _ = engine.open_run("run_late", kind="tool", name="t")
            for n in (1, 2):
                _progress(run, n)
                await asyncio.sleep(0.05)
            engine.end_run(run, "ok")

        live = hub.start("run_late", "tool", "t", work)
        got: list[tuple[int, bool]] = []

        async def follow() -> None:
            async for chunk in live.follow(0, heartbeat=5):
                assert chunk is not None
                got.extend((int(line[4:]), live.done) for line in bytes(chunk).decode().splitlines() if line.startswith("id: "))

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0.01)
        opened.set()
        await asyncio.wait_for(follower, 5)
        await hub.detach()
        return got

    assert asyncio.run(main()) == [(1, False), (2, False)]  # each came live, not at the end

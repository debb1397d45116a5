"""engine.runtime.deadlines: long limits through one watchdog per loop, short ones exact."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

import pytest

import engine.runtime.deadlines as deadlines
from engine.runtime.deadlines import deadline


@pytest.fixture
def watchdog_for_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadlines, "PRECISE_UP_TO", 0.0)  # every limit goes through the watchdog


def test_watchdog_limit_raises_timeout_error_within_a_tick(watchdog_for_everything: None) -> None:
    async def main() -> float:
        started = time.perf_counter()
        with pytest.raises(TimeoutError):
            with deadline(0.2):
                await asyncio.sleep(5)
        return time.perf_counter() - started

    assert 0.2 <= asyncio.run(main()) < 0.2 + deadlines.TICK + 0.3


def test_finishing_in_time_leaves_nothing_scheduled(watchdog_for_everything: None) -> None:
    async def main() -> int:
        for _ in range(100):
            with deadline(30):
                await asyncio.sleep(0)
        return len(deadlines._WATCHDOGS[asyncio.get_running_loop()].active)

    assert asyncio.run(main()) == 0


def test_an_outside_cancel_stays_a_cancel(watchdog_for_everything: None) -> None:
    async def main() -> None:
        async def victim() -> None:
            with deadline(30):
                await asyncio.sleep(5)

        task = asyncio.create_task(victim())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_many_concurrent_limits_expire_independently(watchdog_for_everything: None) -> None:
    async def one(seconds: float, sleep: float) -> str:
        try:
            with deadline(seconds):
                await asyncio.sleep(sleep)
            return "done"
        except TimeoutError:
            return "timeout"

    async def main() -> list[str]:
        return await asyncio.gather(*(one(0.15, 0.01 if i % 2 else 2) for i in range(50)))

    assert asyncio.run(main()) == ["timeout", "done"] * 25


def test_short_limits_get_their_own_exact_timer() -> None:
    async def main() -> float:
        started = time.perf_counter()
        with pytest.raises(TimeoutError):
            with deadline(0.05):
                await asyncio.sleep(5)
        return time.perf_counter() - started

    assert asyncio.run(main()) < 0.5


def test_a_finished_event_loop_is_not_kept_alive(watchdog_for_everything: None) -> None:
    async def main() -> "weakref.ref[asyncio.AbstractEventLoop]":
        with deadline(30):
            await asyncio.sleep(0)
        return weakref.ref(asyncio.get_running_loop())

    loop = asyncio.run(main())
    gc.collect()
    assert loop() is None


def test_outside_a_task_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="inside a task|no running event loop"):
        with deadline(30):
            pass

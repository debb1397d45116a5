"""`python -m bench.store [--quick]`: what the run store adds to a call, measured in one run.

Issue 5's targets: the store adds under 20% to the 3-step workflow case, and never blocks the
event loop for more than 5 ms. Same project, same process, interleaved rounds: calls with no
store, then with a SQLite store (events, tool logs and runs written by its writer thread).
Loop blocking is the worst lateness of a 1 ms ticker task running beside the calls; it runs
in the rounds without the store too, so that the machine's own noise is measured alongside.
Garbage collections are counted and timed per round kind (`gc.callbacks`): a full collection
is the usual cause of a long pause, and the store must not set any off.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engine import Engine

from .projects import chain_tool, write_chain_project


class _Collections:
    """Garbage collections by generation while `phase` is set: how many, total and longest ms."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self.seen: dict[tuple[str, int], list[float]] = {}
        self._started = 0.0

    def __call__(self, stage: str, info: dict[str, Any]) -> None:
        if self.phase is None:
            return
        if stage == "start":
            self._started = time.perf_counter()
        else:
            self.seen.setdefault((self.phase, info["generation"]), []).append((time.perf_counter() - self._started) * 1000)

    def summary(self, phase: str) -> str:
        parts = []
        for generation in (0, 1, 2):
            pauses = self.seen.get((phase, generation), [])
            if pauses:
                parts.append(f"gen{generation} {len(pauses)}× (max {max(pauses):.1f} ms)")
            else:
                parts.append(f"gen{generation} 0×")
        return ", ".join(parts)


async def _calls(engine: Engine, tool: str, count: int, sink: list[object]) -> list[int]:
    times = []
    for _ in range(count):
        started = time.perf_counter_ns()
        await engine.call_tool(tool, {"x": 1, "label": "bench"}, on_event=sink.append)
        times.append(time.perf_counter_ns() - started)
        sink.clear()
        await asyncio.sleep(0)  # let the ticker run between calls, as a server's loop would
    return times


async def _ticker(stop: asyncio.Event, lateness: list[float]) -> None:
    period = 0.001
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(period)
        lateness.append(time.perf_counter() - before - period)


async def _round(engine: Engine, tool: str, count: int, sink: list[object], lateness: list[float]) -> tuple[list[int], float]:
    stop = asyncio.Event()
    ticker = asyncio.create_task(_ticker(stop, lateness))
    started = time.perf_counter()
    times = await _calls(engine, tool, count, sink)
    wall = time.perf_counter() - started
    stop.set()
    await ticker
    return times, wall


def _lateness(values: list[float]) -> tuple[float, float]:
    """(p99, worst) in ms."""
    if not values:
        return 0.0, 0.0
    ordered = sorted(values)
    return ordered[int(len(ordered) * 0.99)] * 1000, ordered[-1] * 1000


async def run(quick: bool) -> int:
    work = Path(tempfile.mkdtemp(prefix="skillyard-bench-store-"))
    root = write_chain_project(work / "project", [3], module="bench_store_chain")
    sys.path.insert(0, str(root))
    tool = chain_tool(3)
    plain = Engine.from_dir(root)
    stored = Engine.from_dir(root, store=work / "runs.db")
    per_round, rounds = (300, 3) if quick else (3000, 5)
    sink: list[object] = []
    await _calls(plain, tool, 200, sink)
    await _calls(stored, tool, 200, sink)
    stored.store.flush()  # type: ignore[union-attr]
    collections = _Collections()
    gc.callbacks.append(collections)
    off: list[int] = []
    on: list[int] = []
    off_wall = on_wall = 0.0
    late_off: list[float] = []
    late_on: list[float] = []
    try:
        for _ in range(rounds):
            collections.phase = "off"
            times, wall = await _round(plain, tool, per_round, sink, late_off)
            off += times
            off_wall += wall
            collections.phase = "on"
            times, wall = await _round(stored, tool, per_round, sink, late_on)
            on += times
            on_wall += wall
            collections.phase = None
    finally:
        collections.phase = None
        gc.callbacks.remove(collections)
    started = time.perf_counter()
    stored.store.flush(timeout=600)  # type: ignore[union-attr]
    backlog = time.perf_counter() - started
    recorded = len(stored.store.runs(limit=1_000_000))  # type: ignore[union-attr]
    stored.close()
    off_us, on_us = statistics.median(off) / 1000, statistics.median(on) / 1000
    off_mean, on_mean = statistics.fmean(off) / 1000, statistics.fmean(on) / 1000
    added = (on_us - off_us) / off_us * 100
    p99_off, worst_off = _lateness(late_off)
    p99_on, worst_on = _lateness(late_on)
    print("Run store: per-call time of a 3-step workflow, store off vs on (same run)")
    print(f"  store off   median {off_us:8.1f} µs   mean {off_mean:8.1f} µs   {len(off) / off_wall:8,.0f} calls/s   ({len(off):,} calls)")
    print(f"  store on    median {on_us:8.1f} µs   mean {on_mean:8.1f} µs   {len(on) / on_wall:8,.0f} calls/s   "
          f"({len(on):,} calls, {recorded:,} runs recorded)")
    verdict = "n/a (quick)" if quick else ("PASS" if added < 20 else "MISS")
    print(f"  → the store adds {added:+.1f}% (median; mean {(on_mean - off_mean) / off_mean * 100:+.1f}%)   target < 20%   {verdict}")
    print(f"  event-loop lateness, 1 ms ticker: store off p99 {p99_off:.2f} ms, worst {worst_off:.2f} ms ({len(late_off):,} ticks); "
          f"store on p99 {p99_on:.2f} ms, worst {worst_on:.2f} ms ({len(late_on):,} ticks)")
    verdict = "n/a (quick)" if quick else ("PASS" if worst_on <= 5 else "MISS")
    print(f"  → worst event-loop lateness with the store on: {worst_on:.2f} ms   target ≤ 5 ms   {verdict}"
          + ("" if worst_off <= 5 else f"   (the machine alone: {worst_off:.2f} ms without the store)"))
    print(f"  garbage collections, store off: {collections.summary('off')}")
    print(f"  garbage collections, store on:  {collections.summary('on')}")
    print(f"  the writer finished the last of it {backlog * 1000:,.0f} ms after the calls")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls; targets not judged")
    return asyncio.run(run(parser.parse_args(argv).quick))


if __name__ == "__main__":
    sys.exit(main())

"""`python -m bench.store [--quick] [--postgres URL | --no-postgres]`: what the run store adds to a call, measured in one run.

Issue 5's targets: the store adds under 20% to the 3-step workflow case, and never blocks the
event loop for more than 5 ms. Issue 11's: the store's CPU per 3-step call (process CPU time,
store on minus store off, same run; the writer's catching up after each round included) is
at most 60 µs with SQLite and 150 µs with PostgreSQL (this process only: the PostgreSQL
server's own CPU is another process's). Same project, same process, interleaved rounds:
calls with no store, then with a SQLite store, then with a PostgreSQL store (`--postgres URL`,
else a throwaway cluster when initdb is installed — tests/pg_cluster.py —, else skipped).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import Engine
from engine.store.writer import STATEMENT_EVENTS

from .projects import chain_tool, write_chain_project
from .servers import throwaway_postgres
from .store_floor import ROWS_PER_STATEMENT, floor


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


CPU_TARGETS_US = {"sqlite": 60.0, "postgresql": 150.0}


@dataclass
class _Kind:
    """One kind of round (store off, SQLite, PostgreSQL) and what its rounds measured."""

    name: str
    engine: Engine
    times: list[int] = field(default_factory=list)
    wall: float = 0.0
    cpu: float = 0.0  # process CPU seconds, the writer's catching up included
    loop_cpu: float = 0.0  # of which the event loop's thread (encoding, the listener, spills)
    writer_cpu: float | None = 0.0  # of which the store's writer thread (None: the system cannot tell)
    lateness: list[float] = field(default_factory=list)


async def _measure(kind: _Kind, tool: str, count: int, sink: list[object], collections: _Collections) -> None:
    collections.phase = kind.name
    store = kind.engine.store
    writer = store.writer_cpu() if store is not None else None
    cpu, loop_cpu = time.process_time(), time.thread_time()
    times, wall = await _round(kind.engine, tool, count, sink, kind.lateness)
    if store is not None:
        store.flush(timeout=600)  # its CPU belongs to these calls, not to the next round's
    kind.cpu += time.process_time() - cpu
    kind.loop_cpu += time.thread_time() - loop_cpu
    if store is not None:
        after = store.writer_cpu()
        kind.writer_cpu = None if writer is None or after is None or kind.writer_cpu is None else kind.writer_cpu + after - writer
    collections.phase = None
    kind.times += times
    kind.wall += wall



async def run(quick: bool, postgres: str | None = None, use_postgres: bool = True) -> int:
    work = Path(tempfile.mkdtemp(prefix="skillyard-bench-store-"))
    root = write_chain_project(work / "project", [3], module="bench_store_chain")
    sys.path.insert(0, str(root))
    tool = chain_tool(3)
    url, cluster = throwaway_postgres(postgres, use_postgres)
    kinds = [_Kind("off", Engine.from_dir(root)), _Kind("sqlite", Engine.from_dir(root, store=work / "runs.db"))]
    if url:
        kinds.append(_Kind("postgresql", Engine.from_dir(root, store=url)))
    per_round, rounds = (300, 3) if quick else (3000, 5)
    sink: list[object] = []
    for kind in kinds:
        await _calls(kind.engine, tool, 200, sink)
        if kind.engine.store is not None:
            kind.engine.store.flush()
    collections = _Collections()
    gc.callbacks.append(collections)
    try:
        for _ in range(rounds):
            for kind in kinds:
                await _measure(kind, tool, per_round, sink, collections)
    finally:
        collections.phase = None
        gc.callbacks.remove(collections)
    try:
        _report(kinds, collections, quick)
        _report_floor(work / "runs.db", len(kinds[1].engine.store.runs(limit=1_000_000)))  # type: ignore[union-attr]
    finally:
        for kind in kinds:
            kind.engine.close()
        if cluster is not None:
            cluster.destroy()
    return 0


def _split(kind: _Kind, off: _Kind) -> str:
    """Where a kind's store CPU went, per call: the event loop's thread, the writer thread, the rest."""
    calls = len(kind.times)
    loop = (kind.loop_cpu / calls - off.loop_cpu / len(off.times)) * 1e6
    if kind.writer_cpu is None:
        return f"the event loop's thread {loop:+.1f} µs (encoding, listener, spills), the writer thread: unknown on this system"
    writer = kind.writer_cpu / calls * 1e6
    rest = (kind.cpu / calls - off.cpu / len(off.times)) * 1e6 - loop - writer
    return f"the event loop's thread {loop:+.1f} µs (encoding, listener, spills), the writer thread {writer:.1f} µs, other threads {rest:+.1f} µs"


def _report(kinds: list[_Kind], collections: _Collections, quick: bool) -> None:
    off = kinds[0]
    off_us, off_mean = statistics.median(off.times) / 1000, statistics.fmean(off.times) / 1000
    off_cpu = off.cpu / len(off.times) * 1e6
    p99_off, worst_off = _lateness(off.lateness)
    print("Run store: per-call time of a 3-step workflow, store off vs on (same run)")
    print(f"  store off   median {off_us:8.1f} µs   mean {off_mean:8.1f} µs   {len(off.times) / off.wall:8,.0f} calls/s   "
          f"CPU {off_cpu:7.1f} µs/call   ({len(off.times):,} calls)")
    for kind in kinds[1:]:
        recorded = len(kind.engine.store.runs(limit=1_000_000))  # type: ignore[union-attr]
        on_us, on_mean = statistics.median(kind.times) / 1000, statistics.fmean(kind.times) / 1000
        on_cpu = kind.cpu / len(kind.times) * 1e6
        added = (on_us - off_us) / off_us * 100
        p99_on, worst_on = _lateness(kind.lateness)
        print(f"  {kind.name:<10}  median {on_us:8.1f} µs   mean {on_mean:8.1f} µs   {len(kind.times) / kind.wall:8,.0f} calls/s   "
              f"CPU {on_cpu:7.1f} µs/call   ({len(kind.times):,} calls, {recorded:,} runs recorded)")
        verdict = "n/a (quick)" if quick else ("PASS" if added < 20 else "MISS")
        print(f"  → {kind.name}: the store adds {added:+.1f}% (median; mean {(on_mean - off_mean) / off_mean * 100:+.1f}%)   "
              f"target < 20%   {verdict}")
        store_cpu = on_cpu - off_cpu
        target = CPU_TARGETS_US[kind.name]
        verdict = "n/a (quick)" if quick else ("PASS" if store_cpu <= target else "MISS")
        print(f"  → {kind.name}: store CPU {store_cpu:+.1f} µs per 3-step call (×{on_cpu / off_cpu:.2f} of the call's CPU)   "
              f"target ≤ {target:.0f} µs   {verdict}")
        print(f"      of which {_split(kind, off)}")
        verdict = "n/a (quick)" if quick else ("PASS" if worst_on <= 5 else "MISS")
        print(f"  → {kind.name}: event-loop lateness p99 {p99_on:.2f} ms, worst {worst_on:.2f} ms ({len(kind.lateness):,} ticks)   "
              f"target ≤ 5 ms   {verdict}" + ("" if worst_off <= 5 else f"   (the machine alone: {worst_off:.2f} ms)"))
    print(f"  event-loop lateness with the store off: p99 {p99_off:.2f} ms, worst {worst_off:.2f} ms ({len(off.lateness):,} ticks)")
    for kind in kinds:
        print(f"  garbage collections, {kind.name:<10}: {collections.summary(kind.name)}")
    if len(kinds) < 3:
        print("  (PostgreSQL not measured: give --postgres URL, or install PostgreSQL for a throwaway cluster)")


def _report_floor(source: Path, calls: int) -> None:
    """The SQLite store's floor (bench/store_floor.py): SQLite alone, the same event rows, this run."""
    floors = floor(source, calls)
    print(f"Floor: raw sqlite3 inserting the same event rows in a loop (one thread, {ROWS_PER_STATEMENT} rows per INSERT, "
          f"{STATEMENT_EVENTS:,} per transaction; no implied rows, no listener), CPU per call:")
    print(f"  events as the schema has them (rowid, index)   {floors['schema']:7.1f} µs")
    print(f"  events as keyed (run_id, seq), random run ids  {floors['keyed']:7.1f} µs")
    print(f"  the same, run ids with a time-ordered prefix   {floors['time-ordered']:7.1f} µs")
    print(f"  a rowid table without any key                  {floors['rowid']:7.1f} µs")
    print(f"  one row per run, its events packed (the store) {floors['packed']:7.1f} µs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls; targets not judged")
    parser.add_argument("--postgres", metavar="URL", help="measure this PostgreSQL store (default: a throwaway cluster if installed)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    ns = parser.parse_args(argv)
    return asyncio.run(run(ns.quick, ns.postgres, not ns.no_postgres))


if __name__ == "__main__":
    sys.exit(main())

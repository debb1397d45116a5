"""`python -m bench.store [--quick]`: what the run store adds to a call, measured in one run.

Issue 5's targets: the store adds under 20% to the 3-step workflow case, and never blocks the
event loop for more than 5 ms. Same project, same process, interleaved rounds: calls with no
store, then with a SQLite store (events, tool logs and runs written by its writer thread).
Loop blocking is the worst lateness of a 1 ms ticker task running beside the calls.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from engine import Engine

from .projects import chain_tool, write_chain_project


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
    off: list[int] = []
    on: list[int] = []
    lateness: list[float] = []
    for _ in range(rounds):
        off += await _calls(plain, tool, per_round, sink)
        stop = asyncio.Event()
        ticker = asyncio.create_task(_ticker(stop, lateness))
        on += await _calls(stored, tool, per_round, sink)
        stop.set()
        await ticker
    stored.store.flush()  # type: ignore[union-attr]
    recorded = len(stored.store.runs(limit=1_000_000))  # type: ignore[union-attr]
    stored.close()
    off_us, on_us = statistics.median(off) / 1000, statistics.median(on) / 1000
    added = (on_us - off_us) / off_us * 100
    worst_ms = max(lateness) * 1000 if lateness else 0.0
    ordered = sorted(lateness)
    p99_ms = ordered[int(len(ordered) * 0.99)] * 1000 if ordered else 0.0
    print("Run store: per-call time of a 3-step workflow, store off vs on (same run)")
    print(f"  store off   median {off_us:8.1f} µs   ({len(off):,} calls)")
    print(f"  store on    median {on_us:8.1f} µs   ({len(on):,} calls, {recorded:,} runs recorded)")
    verdict = "n/a (quick)" if quick else ("PASS" if added < 20 else "MISS")
    print(f"  → the store adds {added:+.1f}%   target < 20%   {verdict}")
    verdict = "n/a (quick)" if quick else ("PASS" if worst_ms <= 5 else "MISS")
    print(f"  → worst event-loop lateness with the store on: {worst_ms:.2f} ms (p99 {p99_ms:.2f} ms, "
          f"{len(lateness):,} ticks)   target ≤ 5 ms   {verdict}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls; targets not judged")
    return asyncio.run(run(parser.parse_args(argv).quick))


if __name__ == "__main__":
    sys.exit(main())

"""`python -m bench.batch [--quick]`: what `skillyard batch` costs over calling the tool directly.

Issue 15's target: 1,000 `textReport` cases at concurrency 8 reach ≥ 80 % of the throughput of
the same calls made directly through `Engine.call_tool` (8 at a time) in the same run. The
batch side is the whole machinery the CLI uses: the cases' checks (one `equals` per case),
the results file (a line written and flushed per case), the progress lines (to /dev/null).
Rounds alternate so that the machine's drift hits both sides alike; the median is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from engine import Engine
from engine.batch.dataset import Case
from engine.batch.progress import Progress
from engine.batch.runner import BatchCase, BatchRun, ResultsFile, run_batch
from engine.link.expect import compile_checks

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.8


def _cases(count: int) -> list[Case]:
    return [Case(str(i), {"text": f"case {i}: the quick brown fox jumps over the lazy dog"}, {"path": "/stats/words", "equals": 10},
                 f"bench:{i}") for i in range(count)]


async def _direct(engine: Engine, cases: list[Case], concurrency: int) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one(case: Case) -> None:
        async with gate:
            await engine.call_tool("textReport", case.arguments)

    started = time.perf_counter()
    await asyncio.gather(*(one(case) for case in cases))
    return len(cases) / (time.perf_counter() - started)


async def _batch(engine: Engine, cases: list[Case], concurrency: int, out: Path) -> float:
    planned = [BatchCase(case, compile_checks(case.expect, case.where)) for case in cases]
    results = ResultsFile(out, engine.project.redactor.redact)
    with open(os.devnull, "w") as devnull:
        progress = Progress(devnull, len(planned), live=False)
        started = time.perf_counter()
        records = await run_batch(engine, BatchRun("textReport", planned, concurrency), results, progress)
        elapsed = time.perf_counter() - started
    results.close()
    out.unlink()
    assert all(r["passed"] for r in records), "the bench's expectation must hold"
    return len(cases) / elapsed


async def _measure(count: int, rounds: int, concurrency: int) -> tuple[list[float], list[float]]:
    engine = Engine.from_dir(ROOT)
    cases = _cases(count)
    direct, batched = [], []
    with tempfile.TemporaryDirectory() as tmp:
        await _direct(engine, cases[:50], concurrency)  # warm up both paths
        await _batch(engine, cases[:50], concurrency, Path(tmp) / "warm.jsonl")
        for index in range(rounds):
            direct.append(await _direct(engine, cases, concurrency))
            batched.append(await _batch(engine, cases, concurrency, Path(tmp) / f"r{index}.jsonl"))
    engine.close()
    return direct, batched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 cases, 3 rounds")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    ns = parser.parse_args(argv)
    count, rounds = (200, 3) if ns.quick else (ns.cases, 5)
    direct, batched = asyncio.run(_measure(count, rounds, ns.concurrency))
    ratio = statistics.median(b / d for b, d in zip(batched, direct, strict=True))
    print(f"{count} textReport cases, concurrency {ns.concurrency}, {rounds} rounds (median)")
    print(f"  Engine.call_tool directly   {statistics.median(direct):8.0f} calls/s")
    print(f"  skillyard batch machinery   {statistics.median(batched):8.0f} cases/s")
    verdict = "meets" if ratio >= TARGET else "MISSES"
    print(f"  batch / direct              {ratio:8.2f}   ({verdict} the ≥ {TARGET:.2f} target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

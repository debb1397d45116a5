"""Small timing helpers: per-call samples in nanoseconds, medians, percentiles."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable


@dataclass
class Samples:
    """Per-call durations of one variant, in nanoseconds, accumulated over rounds."""

    name: str
    ns: list[int] = field(default_factory=list)
    cpu_ns: int = 0  # thread CPU time over all calls: unaffected by other processes' turns

    @property
    def cpu_us(self) -> float:
        """Mean CPU time per call (includes GC and the timer itself)."""
        return self.cpu_ns / len(self.ns) / 1000 if self.ns else float("nan")

    @property
    def calls(self) -> int:
        return len(self.ns)

    @property
    def median_us(self) -> float:
        return statistics.median(self.ns) / 1000 if self.ns else float("nan")

    def percentile_us(self, q: float) -> float:
        if not self.ns:
            return float("nan")
        ordered = sorted(self.ns)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "median_us": round(self.median_us, 3),
            "p10_us": round(self.percentile_us(0.10), 3),
            "p90_us": round(self.percentile_us(0.90), 3),
            "cpu_us": round(self.cpu_us, 3),
        }


def sample_sync(fn: Callable[[], Any], calls: int, into: Samples) -> None:
    """Time `calls` calls of `fn` one by one (the caller decides when to collect garbage)."""
    clock = time.perf_counter_ns
    out = into.ns
    cpu_start = time.thread_time_ns()
    for _ in range(calls):
        start = clock()
        fn()
        out.append(clock() - start)
    into.cpu_ns += time.thread_time_ns() - cpu_start


async def sample_async(fn: Callable[[], Awaitable[Any]], calls: int, into: Samples) -> None:
    """Time `calls` awaited calls of `fn` one by one (the caller decides when to collect garbage)."""
    clock = time.perf_counter_ns
    out = into.ns
    cpu_start = time.thread_time_ns()
    for _ in range(calls):
        start = clock()
        await fn()
        out.append(clock() - start)
    into.cpu_ns += time.thread_time_ns() - cpu_start


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")

"""Durations for events and results, cheaply: integer nanoseconds, no `round()` per event."""

from __future__ import annotations

from time import perf_counter_ns

__all__ = ["PLAIN_TYPES", "elapsed_ms", "perf_counter_ns"]

# Values of these types are never awaitable and carry no extra metadata: one set lookup
# answers "could this be something special?" on the hot path.
PLAIN_TYPES = frozenset({dict, list, str, int, float, bool, type(None)})


def elapsed_ms(started_ns: int) -> float:
    """Milliseconds since `started_ns` (from `perf_counter_ns`), to 2 decimals (truncated)."""
    return (perf_counter_ns() - started_ns) // 10_000 / 100

"""How far a batch got, on stderr: a live bar on a terminal, plain lines otherwise.

On a terminal one line is redrawn at most ten times a second (done/total, ok, failed,
rate, ETA, failures by code). Elsewhere (CI logs, files) a plain line is written per 5 %
of the cases or every 10 s, whichever comes first, so a log shows progress without flooding.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable, TextIO

_REDRAW_S = 0.1
_PLAIN_EVERY_S = 10.0
_PLAIN_EVERY_FRACTION = 0.05


class Progress:
    def __init__(self, stream: TextIO, total: int, *, live: bool, clock: Callable[[], float] = time.monotonic):
        self.stream = stream
        self.total = total
        self.live = live
        self.clock = clock
        self.started = clock()
        self.done = self.ok = self.expect_failed = 0
        self.failures: Counter[str] = Counter()
        self._last_draw = 0.0
        self._last_plain_done = 0
        self._last_plain_at = self.started

    def __call__(self, record: dict[str, Any]) -> None:
        """One finished case."""
        self.done += 1
        if record["ok"]:
            self.ok += 1
        else:
            self.failures[(record.get("error") or {}).get("code", "error")] += 1
        if not record.get("passed", True):
            self.expect_failed += 1
        now = self.clock()
        if self.live:
            if now - self._last_draw >= _REDRAW_S or self.done == self.total:
                self._last_draw = now
                self.stream.write("\r\x1b[2K" + self.line(now))
                self.stream.flush()
        elif self._plain_due(now):
            self._last_plain_done, self._last_plain_at = self.done, now
            self.stream.write(self.line(now) + "\n")
            self.stream.flush()

    def _plain_due(self, now: float) -> bool:
        step = max(1, int(self.total * _PLAIN_EVERY_FRACTION))
        return self.done == self.total or self.done - self._last_plain_done >= step or now - self._last_plain_at >= _PLAIN_EVERY_S

    def line(self, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        width = 20
        filled = int(width * self.done / self.total) if self.total else width
        bar = "█" * filled + "·" * (width - filled) if self.live else ""
        parts = [f"{bar} {self.done}/{self.total}".strip(), f"ok {self.ok}", f"failed {self.done - self.ok}"]
        if self.expect_failed:
            parts.append(f"expectations failed {self.expect_failed}")
        parts.append(f"{rate:.1f}/s")
        if self.done < self.total:
            parts.append(f"ETA {_duration(eta)}")
        if self.failures:
            parts.append(", ".join(f"{code} {count}" for code, count in self.failures.most_common(3)))
        return " · ".join(parts)

    def close(self) -> None:
        if self.live and self.done:
            self.stream.write("\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"

"""What the store could not write as it was: counted by kind, logged once per kind, and the
failure the next `flush()` reports. One `Failures` per store; its writer, its ready rows
and its redaction entry report to it."""

from __future__ import annotations

import threading

from ..logging import logger

NOT_RECORDED = "not_recorded"  # the key of the note that replaces data the store cannot write


class Failures:
    """How many events a store could not write as they were, by kind, and the last failure
    not yet reported (flush() raises it once)."""

    def __init__(self, where: str) -> None:
        self._where = where
        self._counts: dict[str, int] = {}  # kind → how many events (see Store.write_failures)
        self._lock = threading.Lock()  # counted by the listener's thread (a spill) and the writer's
        self._failed: BaseException | None = None

    def count(self, kind: str, events: int, detail: str) -> None:
        """Count; log the first of each kind only (a flood of bad rows is one log line)."""
        with self._lock:
            first = kind not in self._counts
            self._counts[kind] = self._counts.get(kind, 0) + events
        if first:
            logger.error("run store: events not written as they were", kind=kind, store=self._where, detail=detail,
                         hint="write_failures counts them; later ones of this kind are not logged")

    def fail(self, error: BaseException) -> None:
        """Remember `error` for the next flush() (the newest wins)."""
        self._failed = error

    def counts(self) -> dict[str, int]:
        """A copy of the counts (empty: none)."""
        with self._lock:
            return dict(self._counts)

    def take(self) -> BaseException | None:
        """The failure to report, once: later batches may well succeed."""
        failed, self._failed = self._failed, None
        return failed

"""Notices: a store's channels of short text payloads, and the thread that delivers them.

Every store's notices answer `listen(channel, callback)`, `notify(channel, payload)` and
`close()`. `LocalNotices` (here) reach this process only: SQLite's, whose writer delivers the
EVENTS_CHANNEL notice after each commit and whose settings poll the tool-settings one.
PostgreSQL's go through the database (LISTEN/NOTIFY, postgres_notices.py), to every process
sharing it. Callbacks run on a store thread, never the caller's.
"""

from __future__ import annotations

import contextlib
import threading
from queue import SimpleQueue
from typing import Callable, Protocol

from ..logging import logger


class Notices(Protocol):
    def listen(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]: ...

    def notify(self, channel: str, payload: str) -> None: ...

    def close(self) -> None: ...


class LocalNotices:
    """Listeners by channel, and a thread (started by the first listener) that calls them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[str, list[Callable[[str], None]]] = {}
        self._deliveries: SimpleQueue[tuple[str, list[str]] | None] | None = None  # payloads by channel

    def listen(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call `callback(payload)` for each notice on `channel`; returns a function that stops
        listening. The listener is active on return."""
        with self._lock:
            self._listeners.setdefault(channel, []).append(callback)
            if self._deliveries is None:
                self._deliveries = SimpleQueue()
                threading.Thread(target=self._delivery_loop, args=(self._deliveries,), name="skillyard-store-notices",
                                 daemon=True).start()

        def stop() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._listeners.get(channel, []).remove(callback)

        return stop

    def notify(self, channel: str, payload: str) -> None:
        """Send `payload` to the listeners of `channel` (in this process only)."""
        self.deliver(channel, [payload])

    def listening(self, channel: str) -> bool:
        """Whether someone listens on `channel` (a payload nobody hears need not be made)."""
        return bool(self._listeners.get(channel))

    def channels(self) -> set[str]:
        """The channels someone listens on."""
        with self._lock:
            return {channel for channel, callbacks in self._listeners.items() if callbacks}

    def deliver(self, channel: str, payloads: list[str]) -> None:
        """Queue `payloads` for the listeners of `channel` (one item for them all: the writer
        hands over a batch's notices in one C call)."""
        if self._listeners.get(channel) and self._deliveries is not None:
            self._deliveries.put((channel, payloads))

    def close(self) -> None:
        if self._deliveries is not None:
            self._deliveries.put(None)

    def _delivery_loop(self, deliveries: "SimpleQueue[tuple[str, list[str]] | None]") -> None:
        while (item := deliveries.get()) is not None:
            channel, payloads = item
            for payload in payloads:
                for callback in list(self._listeners.get(channel, ())):
                    try:
                        callback(payload)
                    except Exception as exc:  # noqa: BLE001 - a listener's bug must not stop the others
                        logger.error("run store: a notification listener failed", channel=channel,
                                     error=f"{type(exc).__name__}: {exc}")

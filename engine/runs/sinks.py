"""RunSink: what takes every run whole, asked once as each run opens.

A sink (the run store, the HTTP service's hub) keeps or shows every event of a run, so it
gives each run a listener of its own (a list's or deque's `append`: no Python call per event)
instead of being one listener that sorts every run's events by id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from .events import SyncListener
    from .run import Run


class RunSink(Protocol):
    """Takes each run whole: `open(run)` as the run opens gives the listener of its events."""

    @property
    def wants_records(self) -> bool:
        """Whether it needs each event's encoded record (`Event.data_json`, encoded once by the Run)."""
        ...

    def open(self, run: "Run") -> "SyncListener":
        """The listener of `run`'s events (`run.on_end` tells it the run is over)."""
        ...


class OpenerSink:
    """A RunSink of a listener and a function that opens each run for it
    (`Engine.subscribe(listener, for_run=opener)`)."""

    __slots__ = ("listener", "open", "wants_records")

    def __init__(self, listener: object, opener: "Callable[[Run], SyncListener]", wants_records: bool):
        self.listener = listener
        self.open = opener
        self.wants_records = wants_records

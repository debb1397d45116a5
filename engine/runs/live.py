"""LiveRuns: the registry of live runs, and the one sequence every run goes through.

open (a Run delivering to the subscribers, each sink's own listener and the caller's) →
drive (the work, with the run's scrubber on for log lines; a crash ends the run in error) →
end (the first end wins, by `end_status`) → forget it as live → drain its queued listeners.
The Engine's tool calls, the agent loop and the Temporal client's agent runs open and drive
their runs here and nowhere else; a front door that did not start a run finds it in `live`
to answer or cancel it.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, TypeVar

from ..providers.fallback import MODEL_EVENTS
from ..safety.redaction import enter_run, leave_run
from .events import Listener, QueuedListener, prepare_listeners, wants_records, watches
from .run import Approver, Run, RunKind, RunStatus

if TYPE_CHECKING:
    from ..safety.redaction import Redactor
    from .sinks import RunSink

_model_events_to = MODEL_EVENTS.set  # the ContextVar's own C method: no Python frame per call
_weak = weakref.ref
_current_task = asyncio.current_task

T = TypeVar("T")
RunEnd = tuple[RunStatus, Any, "dict[str, Any] | None"]  # (status, result, error) a run ends with
EndOf = Callable[[Run, Any], RunEnd]  # how a run ended, from what its work returned (None: nothing)


class RunProject(Protocol):
    """What opening a run reads of the project it runs on (a `Project`, runtime/project.py)."""

    @property
    def redactor(self) -> "Redactor": ...

    @property
    def settings(self) -> Any: ...

    @property
    def falls_back(self) -> bool: ...


class LiveRuns:
    """The live runs by id, who hears them, and the sequence that opens, drives and ends them."""

    __slots__ = ("live", "_listeners", "_sinks", "_records_wanted", "_watchers")

    def __init__(self) -> None:
        self.live: dict[str, Run] = {}  # any front door may answer or cancel these
        self._listeners: list[Listener] = []  # hear every run's events
        self._sinks: list[RunSink] = []  # take every run whole
        self._records_wanted = False  # whether a listener or sink needs encoded records: kept in step
        self._watchers = 0  # how many of the listeners show events as they come: kept in step

    @property
    def listeners(self) -> tuple[Listener, ...]:
        """Who hears every run's events (the sinks aside)."""
        return tuple(self._listeners)

    @property
    def sinks(self) -> "tuple[RunSink, ...]":
        return tuple(self._sinks)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """`listener` hears every later run's events; returns a function that unsubscribes."""
        self._listeners.append(listener)
        self._count_records()

        def unsubscribe() -> None:
            self._listeners.remove(listener)
            self._count_records()

        return unsubscribe

    def add_sink(self, sink: "RunSink") -> Callable[[], None]:
        """`sink` takes every later run whole (`sink.open(run)` as it opens); returns a function that removes it."""
        self._sinks.append(sink)
        self._count_records()

        def remove() -> None:
            self._sinks.remove(sink)
            self._count_records()

        return remove

    def _count_records(self) -> None:
        """What every run opens with, counted when the listeners change rather than per run."""
        self._records_wanted = wants_records(self._listeners) or any(sink.wants_records for sink in self._sinks)
        self._watchers = sum(1 for listener in self._listeners if watches(listener))

    def open(
        self,
        project: RunProject,
        run_id: str,
        on_event: Listener | None = None,
        kind: RunKind = "tool",
        name: str = "",
        principal: str | None = None,
        approver: Approver | None = None,
        approval_timeout: float = 600.0,
    ) -> tuple[Run, list[QueuedListener]]:
        """A new live Run, and its queued (async) listeners, which `drive` drains at its end.
        A run opened here ends through `drive` (or `end`, for one driven elsewhere)."""
        listeners = self._listeners if on_event is None else [*self._listeners, on_event]
        inline, queued = prepare_listeners(listeners)  # new lists: a later subscribe() does not reach this run
        # the caller's own listener is a record sink by its mark (record_sink): read inline, it runs per call
        records = self._records_wanted or (on_event is not None and getattr(on_event, "wants_records", False))
        run = Run(run_id, inline, project.redactor.for_run(), kind, name, principal, approver, approval_timeout,
                  records, project.settings.limits.max_events_per_run, _current_task())
        # the caller's own listener watches unless marked quiet (a bare callable: `watches` without its wrapper case)
        run.watchers = self._watchers + (on_event is not None and not getattr(on_event, "quiet", False))
        if self._sinks:  # first, as they were subscribed first (the store, as the engine opens)
            inline[:0] = [sink.open(run) for sink in self._sinks]
        if project.falls_back:  # a model fallback reports into the run; weak: the task's context holds it
            _model_events_to(_weak(run))
        self.live[run_id] = run
        return run, queued

    async def drive(self, run: Run, queued: list[QueuedListener], work: Awaitable[T], end_of: EndOf) -> T:
        """Await `work` (the run's own, already begun: no extra frame for it) and end the run by
        `end_of(run, what work returned)` (None when it raised or was cancelled). A crash (the
        work answers every expected failure) ends the run in error first, and is raised on."""
        token = enter_run(run.scrubber)  # log lines written during the run hide its secrets too
        value: T | None = None
        try:
            value = await work
            return value
        except Exception as exc:
            run.crash(exc)
            raise
        finally:
            leave_run(token)
            run.finish(*end_of(run, value))
            live, run_id = self.live, run.run_id
            if live.get(run_id) is run:
                del live[run_id]
            for listener in queued:
                await listener.close()

    def end(self, run: Run, status: RunStatus, result: Any = None, error: dict[str, Any] | None = None) -> None:
        """Record the end of a run driven elsewhere (the first end wins) and forget it as live."""
        run.finish(status, result=result, error=error)
        if self.live.get(run.run_id) is run:
            del self.live[run.run_id]

"""The runs this server process knows live: their events, followers, tasks and approvals.

`RunHub` subscribes to the engine once, so it sees every run the engine executes — started
over HTTP, over MCP at `/mcp`, or by Python code in the same process — from its first
event. Each run keeps its events (as the store will have them: redacted the same way) in
`seq` order, so a follower can start from any `seq` and gets every later event exactly once,
live, until the run ends. Finished runs stay a while (the newest `keep_finished`) so a
client that reconnects right after the end still resumes from memory; older ones are served
from the run store.

Approvals: when a run emits `confirmation_required`, a future is registered under
(run_id, tool_call_id). The run's approver awaits exactly that future, and
`POST /v1/runs/{run_id}/approvals/{tool_call_id}` resolves exactly that future, so two
confirmations pending in parallel can never receive each other's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import OrderedDict
from typing import Any, AsyncIterator, Awaitable, Callable, Literal

from ..events import Event
from ..logging import logger
from .sse import Final, frame

TERMINAL = frozenset({"tool_call_result", "tool_call_error"})
RunKind = Literal["tool", "agent"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LiveRun:
    """One run's events in memory, and who is waiting for more."""

    def __init__(
        self, run_id: str, kind: RunKind | None, name: str, scrub: Callable[[Any], Any], *, owned: bool,
        principal: str | None = None,
    ):
        self.run_id = run_id
        self.principal = principal  # the key name that started it; None: not started over HTTP (admins only)
        self.kind = kind
        self.name = name
        self.owned = owned  # started by this server: it ends when its task ends
        self.events: list[dict[str, Any]] = []  # contiguous: events[i]["seq"] == i + 1
        self.frames: list[bytes] = []  # the SSE frame of each event, encoded once
        self._held: dict[int, dict[str, Any]] = {}  # arrived early (off-thread emits), waiting for the gap
        self.scrub = scrub
        self.root_call: str | None = None
        self.started_at = _now_ms()
        self.finished_at: int | None = None
        self.status = "running"
        self.error: Any = None
        self.result: dict[str, Any] | None = None
        self.task: asyncio.Task[Any] | None = None
        self.background = False
        self.pending: dict[str, asyncio.Future[bool]] = {}
        self.closed = False  # its last event is in: a tool run's own result, or agent_done
        self._changed = asyncio.Event()

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    @property
    def last_seq(self) -> int:
        return len(self.events)

    def add(self, event: dict[str, Any]) -> None:
        seq = event["seq"]
        if seq != len(self.events) + 1:
            if seq > len(self.events):
                self._held[seq] = event
            return
        self._append(event)
        while self._held:
            nxt = self._held.pop(len(self.events) + 1, None)
            if nxt is None:
                break
            self._append(nxt)
        self._notify()

    def _append(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self.frames.append(frame(event))

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def future(self, tool_call_id: str) -> "asyncio.Future[bool]":
        fut = self.pending.get(tool_call_id)
        if fut is None or fut.done():
            fut = self.pending[tool_call_id] = asyncio.get_running_loop().create_future()
        return fut

    def finish(self, status: str | None = None, *, result: dict[str, Any] | None = None, error: Any = None) -> None:
        if self.done:
            return
        if status is not None:
            self.status = status
        if result is not None:
            self.result = result
        if error is not None:
            self.error = error
        if self.status == "running":
            self.status = "error"
        self.finished_at = _now_ms()
        for fut in self.pending.values():
            if not fut.done():
                fut.set_result(False)
        self.pending.clear()
        self._notify()

    async def follow(self, after: int = 0, *, heartbeat: float | None = None, as_frames: bool = True) -> AsyncIterator[Any]:
        """Every event with seq > `after`, live until the run ends; `None` after `heartbeat`
        seconds without one (time for a keep-alive)."""
        index = max(0, after)
        while True:
            if as_frames:  # every frame that is ready, in one write: far fewer sends under load
                end = len(self.frames)
                if index < end:
                    chunk = self.frames[index] if end - index == 1 else b"".join(self.frames[index:end])
                    index = end
                    if self.closed and not self._held:
                        yield Final(chunk)  # the run's last event: end the response in the same write
                        return
                    yield chunk
            else:
                while index < len(self.events):
                    yield self.events[index]
                    index += 1
            if self.done:
                return
            changed = self._changed
            if heartbeat is None:
                await changed.wait()
                continue
            try:
                await asyncio.wait_for(changed.wait(), heartbeat)
            except TimeoutError:
                yield None

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.run_id,
            "kind": self.kind,
            "name": self.name,
            "status": self.status,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "duration_ms": None if self.finished_at is None else self.finished_at - self.started_at,
            "error": self.error,
            "live": not self.done,
            "pending_approvals": sorted(tid for tid, fut in self.pending.items() if not fut.done()),
        }


class TooManyRuns(Exception):
    """The service, or one key, has as many live runs as it may: retry when one has ended."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class RunHub:
    def __init__(
        self, engine: Any, *, keep_finished: int = 256, approval_timeout: float = 600.0,
        max_live: int | None = None, max_live_per_principal: int | None = None,
    ):
        self.engine = engine
        self.keep_finished = keep_finished
        self.approval_timeout = approval_timeout
        self.max_live = max_live
        self.max_live_per_principal = max_live_per_principal
        self._started_live: dict[str | None, int] = {}  # live runs this server started, per principal
        self.runs: "OrderedDict[str, LiveRun]" = OrderedDict()
        self._finished: "OrderedDict[str, None]" = OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._unsubscribe: Callable[[], None] | None = None

    # ─── lifecycle ───────────────────────────────────────────────────────────────

    def attach(self) -> None:
        """Start observing the engine (call from the server's event loop)."""
        if self._unsubscribe is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._unsubscribe = self.engine.subscribe(self.listener)

    async def detach(self) -> None:
        """Stop observing; cancel the runs this server started and wait for them."""
        if self._unsubscribe is not None:
            with contextlib.suppress(ValueError):
                self._unsubscribe()
            self._unsubscribe = None
        tasks = [run.task for run in self.runs.values() if run.task is not None and not run.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    # ─── recording ───────────────────────────────────────────────────────────────

    def listener(self, event: Event) -> None:
        """The engine's listener: O(1) work per event in the loop thread."""
        if self._thread is not None and threading.get_ident() != self._thread and self._loop is not None:
            self._loop.call_soon_threadsafe(self._record, event)  # a skill emitting from a worker thread
        else:
            self._record(event)

    def _record(self, event: Event) -> None:
        run = self.runs.get(event.run_id)
        if run is None:
            if event.seq != 1:  # began before we subscribed: we could never give its whole stream
                return
            kind: RunKind | None = "agent" if event.type == "agent_start" else "tool" if event.type == "tool_call_start" else None
            name = str(event.data.get("model" if kind == "agent" else "tool", "?"))
            run = self._add(LiveRun(event.run_id, kind, name, self._scrubber(), owned=False))
        if event.seq == 1 and event.type == "tool_call_start":
            run.kind = run.kind or "tool"
            run.root_call = event.tool_call_id
        try:
            data = _prepare(event)
            record = event.to_dict()
            record["data"] = run.scrub(data)
        except Exception:  # noqa: BLE001 - never let a listener fail the run
            logger.exception("server: could not record event", run_id=event.run_id, event=event.type)
            record = {**event.to_dict(), "data": {"unrecordable": True}}
        run.add(record)
        if event.type == "confirmation_required" and event.tool_call_id:
            run.future(event.tool_call_id)
        elif event.type in TERMINAL and event.tool_call_id == run.root_call and run.kind == "tool":
            status = "ok" if event.type == "tool_call_result" else _error_status(event.data.get("error"))
            result = event.result.to_dict() if event.result is not None else None
            run.closed = True
            if run.owned:
                run.status, run.result = status, result
                run.error = None if status == "ok" else event.data.get("error")
            else:
                run.finish(status, result=result, error=None if status == "ok" else event.data.get("error"))
                self._retire(run)
        elif event.type == "agent_done":
            reason = event.data.get("stop_reason")
            status = {"answer": "ok", "cancelled": "cancelled"}.get(reason, "error")
            error = None if status == "ok" else {"code": reason, "message": event.data.get("error")}
            run.closed = True
            if run.owned:
                run.status, run.error = status, error
            else:
                run.finish(status, error=error)
                self._retire(run)

    def _scrubber(self) -> Callable[[Any], Any]:
        redactor = getattr(self.engine.project, "redactor", None)
        return redactor.for_run() if redactor is not None else (lambda value: value)

    def _add(self, run: LiveRun) -> LiveRun:
        self.runs[run.run_id] = run
        return run

    def _retire(self, run: LiveRun) -> None:
        self._finished[run.run_id] = None
        while len(self._finished) > self.keep_finished:
            old, _ = self._finished.popitem(last=False)
            self.runs.pop(old, None)

    # ─── runs this server starts ─────────────────────────────────────────────────

    def start(
        self,
        run_id: str,
        kind: RunKind,
        name: str,
        work: Callable[[LiveRun], Awaitable[Any]],
        *,
        principal: str | None = None,
        root_call: str | None = None,
        background: bool = False,
    ) -> LiveRun:
        """Register the run, then start `work(run)` as a task that outlives the request.

        Raises TooManyRuns when the service or `principal` is at its cap of live runs."""
        self._check_capacity(principal)
        self._started_live[principal] = self._started_live.get(principal, 0) + 1
        run = self._add(LiveRun(run_id, kind, name, self._scrubber(), owned=True, principal=principal))
        store = getattr(self.engine, "store", None)
        if store is not None and principal is not None:
            store.record_owner(run_id, principal)
        run.root_call = root_call
        run.background = background
        run.task = asyncio.get_running_loop().create_task(work(run), name=f"skillyard-run-{run_id}")
        run.task.add_done_callback(lambda task: self._ended(run, task))
        return run

    def _check_capacity(self, principal: str | None) -> None:
        if self.max_live is not None and sum(self._started_live.values()) >= self.max_live:
            raise TooManyRuns(f"this service runs {self.max_live} runs at once (server.max_live_runs); "
                              "retry when one has ended")
        if self.max_live_per_principal is not None and self._started_live.get(principal, 0) >= self.max_live_per_principal:
            raise TooManyRuns(f"this key has {self.max_live_per_principal} live runs (server.max_live_runs_per_key); "
                              "retry when one has ended")

    def _ended(self, run: LiveRun, task: "asyncio.Task[Any]") -> None:
        left = self._started_live.get(run.principal, 1) - 1
        if left:
            self._started_live[run.principal] = left
        else:
            self._started_live.pop(run.principal, None)
        if task.cancelled():
            run.finish("cancelled", error=run.error or {"code": "cancelled", "message": "the run was cancelled"})
        elif task.exception() is not None:
            exc = task.exception()
            logger.error("server: run failed", run_id=run.run_id, error=f"{type(exc).__name__}: {exc}")
            run.finish("error", error={"code": "server_error", "message": f"{type(exc).__name__}: {exc}"})
        else:
            value = task.result()
            to_dict = getattr(value, "to_dict", None)
            run.finish(None, result=to_dict() if callable(to_dict) else run.result)
        self._retire(run)

    def approver_for(self, run_id: str) -> Callable[[Any, dict[str, Any], str], Awaitable[bool]]:
        """The Approver of one run: waits for the answer to that run's (tool_call_id)."""

        async def approve(tool: Any, args: dict[str, Any], tool_call_id: str) -> bool:
            run = self.runs.get(run_id)
            if run is None:
                return False
            fut = run.future(tool_call_id)  # registered already when confirmation_required was emitted
            try:
                async with asyncio.timeout(self.approval_timeout):
                    return bool(await fut)
            except TimeoutError:
                return False
            finally:
                if run.pending.get(tool_call_id) is fut:
                    del run.pending[tool_call_id]

        return approve

    def resolve(self, run_id: str, tool_call_id: str, approve: bool) -> Literal["ok", "unknown_run", "not_pending"]:
        run = self.runs.get(run_id)
        if run is None:
            return "unknown_run"
        fut = run.pending.get(tool_call_id)
        if fut is None or fut.done():
            return "not_pending"
        fut.set_result(approve)
        return "ok"

    def cancel(self, run_id: str) -> bool:
        run = self.runs.get(run_id)
        if run is None or run.task is None or run.task.done():
            return False
        run.task.cancel()
        return True

    def live_count(self) -> int:
        return sum(1 for run in self.runs.values() if not run.done)


def _prepare(event: Event) -> Any:
    """The event data as the store records it (a model's raw JSON arguments parsed)."""
    data = event.data
    if event.type == "tool_call_start":
        arguments = data.get("arguments")
        if isinstance(arguments, (str, bytes)):
            with contextlib.suppress(ValueError):
                data = {**data, "arguments": json.loads(arguments)}
    return data


def _error_status(error: Any) -> str:
    code = error.get("code") if isinstance(error, dict) else None
    return "cancelled" if code == "cancelled" else "error"

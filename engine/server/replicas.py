"""Runs that execute in another process sharing this service's store: one service, N replicas.

With a shared store (PostgreSQL), a run started on replica A can be followed, approved and
cancelled through replica B:

- **follow**: B replays the run's stored events and then waits for the store's notice on
  channel `skillyard_events` (`<run_id> <last_seq>`, sent by A's writer after each commit) to
  read the next ones, until the run's stored status is no longer `running`;
- **approve / cancel**: B checks the run (exists, is the caller's, is running; an approval is
  pending in the store) and sends a notice on `skillyard_control`; the replica whose
  `Engine.runs` holds the Run answers or cancels it there. A run on Temporal is steered
  through Temporal instead (a signal to the run's workflow, a cancel of the execution),
  so it can be answered and cancelled after the replica that started it died.

With the SQLite store (one process) the same code runs: control notices are delivered
in-process; event notices would only tell of this process's own runs, which its hub follows,
so a follower of another process's run reads the store every POLL_S.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from ..store.schema import EVENTS_CHANNEL  # the store's writer: "<run_id> <last_seq>" after each commit
from .api import store_call
from .sse import Final, stored_frames

if TYPE_CHECKING:
    from .._engine import Engine

CONTROL_CHANNEL = "skillyard_control"  # {"kind": "approve" | "cancel", "run_id", …}
FIRST_EVENT_WAIT_S = 2.0  # a run started a moment ago on another replica may not be stored yet
POLL_S = 1.0  # a follower reads the store at least this often, notice or not
FULL_ID_CHARS = len("run_") + 20  # a whole run id (engine.ids); shorter is a prefix: never waited for


class Replicas:
    """This process's side of the shared store: hears notices, follows and steers remote runs."""

    def __init__(self, engine: "Engine"):
        self.engine = engine
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stops: list[Callable[[], None]] = []

    def start(self) -> None:
        """Listen on the store's channels (call once, from the service's event loop)."""
        store = self.engine.store
        if store is None or self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._stops = [store.listen(CONTROL_CHANNEL, self._heard_control)]
        if store.notices_cross_processes:  # in-process ones (SQLite) tell of this process's runs: the hub follows those
            self._stops.append(store.listen(EVENTS_CHANNEL, self._heard_events))

    def stop(self) -> None:
        for stop in self._stops:
            stop()
        self._stops = []

    # ─── notices (called on a store thread) ──────────────────────────────────────

    def _heard_events(self, payload: str) -> None:
        run_id = payload.split(" ", 1)[0]
        if self._loop is not None and (run_id in self._waiters or payload == "*"):
            self._loop.call_soon_threadsafe(self._wake, run_id)

    def _wake(self, run_id: str) -> None:
        waiting = self._waiters.values() if run_id == "*" else [self._waiters.get(run_id, ())]
        for events in waiting:
            for event in events:
                event.set()

    def _heard_control(self, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            return
        if self._loop is not None and isinstance(message, dict) and message.get("run_id") in self.engine.runs:
            self._loop.call_soon_threadsafe(self._control, message)

    def _control(self, message: dict[str, Any]) -> None:
        run = self.engine.runs.get(message["run_id"])
        if run is None:
            return
        if message.get("kind") == "approve":
            run.answer(str(message.get("tool_call_id")), bool(message.get("approve")))
        elif message.get("kind") == "cancel":
            run.cancel()

    # ─── steering a run of another replica ───────────────────────────────────────
    # A run on Temporal is steered through Temporal itself (its approvals are signals
    # to its workflow, a cancel cancels its execution): that works when the replica that started
    # it is gone too. Any other run is steered by a notice to the replica that executes it.

    async def pending(self, record: Any) -> list[str]:
        """The calls of a stored running run (of another process) that wait for an answer."""
        if record.status != "running":
            return []
        temporal = await self._temporal(record)
        if temporal is not None:  # its approvals wait in its workflow (an agent run's, or a direct call's)
            from ..backends.temporal.agent_client import pending_approvals

            with contextlib.suppress(Exception):  # no such execution (yet), or no worker to answer the query
                return await pending_approvals(await temporal.client(), record.id)
            return []
        store = self.engine.store
        assert store is not None
        return await store_call(lambda: store.pending_approvals(record.id))

    async def answer(self, record: Any, tool_call_id: str, approve: bool) -> None:
        temporal = await self._temporal(record)
        if temporal is not None:
            from ..backends.temporal.agent_client import send_approval

            await send_approval(await temporal.client(), record.id, tool_call_id, approve)
            return
        await self._send({"kind": "approve", "run_id": record.id, "tool_call_id": tool_call_id, "approve": approve})

    async def cancel(self, record: Any) -> None:
        await self._send({"kind": "cancel", "run_id": record.id})  # a replica that still runs it ends it cleanly
        temporal = await self._temporal(record)
        if temporal is not None:  # and if it is gone, its execution is cancelled (a worker ends the run)
            from temporalio.service import RPCError

            with contextlib.suppress(RPCError):  # not started (a confirmation waits in its front door), or ended
                await (await temporal.client()).get_workflow_handle(record.id).cancel()

    async def _temporal(self, record: Any) -> Any:
        """The engine's Temporal backend when `record` is a run on Temporal it can reach; else None."""
        backend = self.engine.backend
        if backend is None or getattr(backend, "name", None) != "temporal":
            return None
        executor = await store_call(lambda: backend.store.executor(record.id))
        return backend if executor == "temporal" else None

    async def _send(self, message: dict[str, Any]) -> None:
        store = self.engine.store
        assert store is not None
        await asyncio.to_thread(store.notify, CONTROL_CHANNEL, json.dumps(message))

    # ─── following a run of another replica ──────────────────────────────────────

    async def follow(self, run_id: str, after: int, *, heartbeat: float) -> AsyncIterator[bytes | None]:
        """The run's frames after `after`, read from the store as its notices come, to its end;
        `None` after `heartbeat` seconds without one (time for a keep-alive)."""
        store = self.engine.store
        assert store is not None
        woken = asyncio.Event()
        self._waiters.setdefault(run_id, set()).add(woken)
        loop = asyncio.get_running_loop()
        try:
            last = after
            quiet_since = loop.time()
            while True:
                woken.clear()
                events = await asyncio.to_thread(store.events, run_id, after_seq=last)
                record = await asyncio.to_thread(store.run, run_id)
                if record is not None and record.status != "running":  # ended: what it wrote is all there
                    events += await asyncio.to_thread(store.events, run_id, after_seq=events[-1]["seq"] if events else last)
                    if events:
                        yield Final(b"".join(stored_frames(events)))
                    return
                if events:
                    last = events[-1]["seq"]
                    quiet_since = loop.time()
                    yield b"".join(stored_frames(events))
                elif loop.time() - quiet_since >= heartbeat:
                    quiet_since = loop.time()
                    yield None
                with contextlib.suppress(TimeoutError):  # a notice, or a look anyway: a SQLite store
                    await asyncio.wait_for(woken.wait(), POLL_S)  # shared by processes sends none across
        finally:
            waiters = self._waiters.get(run_id)
            if waiters is not None:
                waiters.discard(woken)
                if not waiters:
                    del self._waiters[run_id]

    async def wait_stored(self, run_id: str, principal: str | None = None) -> Any:
        """The stored run (among `principal`'s: `Store.run`), waiting a moment for one that
        another replica has only just started."""
        store = self.engine.store
        assert store is not None
        deadline = asyncio.get_running_loop().time() + FIRST_EVENT_WAIT_S
        while True:
            record = await store_call(lambda: store.run(run_id, principal=principal), ambiguous=True)
            if record is not None or asyncio.get_running_loop().time() > deadline or len(run_id) != FULL_ID_CHARS:
                return record
            await asyncio.sleep(0.05)

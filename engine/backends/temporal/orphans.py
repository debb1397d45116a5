"""Runs whose front door died while their execution goes on: a worker adopts and ends them.

A run on Temporal is recorded as such in the store (`run_executors`), so the heartbeat sweep
of a shared store does not mark it `interrupted` when the process that wrote its row stops
(a service replica killed mid-call, or the worker that wrote an agent run's first event).
Instead every worker looks, every ADOPT_EVERY_S, for such runs whose process has no heartbeat,
takes them over in the store (its host and pid on the row: one adopter per run, and a dead
adopter's runs are adopted again), and waits for the execution's end:

- a tool run: the front door would have written the execution's last events (they come with
  its end) and the call's last event (`tool_call_result` or `tool_call_error`, which ends the
  run's row); the adopter writes them instead, from the
  execution's outcome, through a Run whose redaction first learned the call's arguments (as
  the workflow's Run redacts the run's other events);
- an agent run: the workflow writes `agent_done` itself; the adopter only ends a row the
  execution left running (terminated by an operator, say);
- no execution at all (the front door died before starting it): the run is `interrupted`,
  as a local run would be.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING, Any

from ...logging import logger
from ...runtime.run import Run
from ...store import StoreError
from .client import call_failure, last_rows, row_event
from .protocol import EXECUTOR
from .served import served

if TYPE_CHECKING:
    from ...store.shared import SharedStore

ADOPT_EVERY_S = 2.0


class Adopter:
    """Adopts the orphaned runs of the shared store and ends each as its execution ends."""

    def __init__(self, client: Any, store: "SharedStore") -> None:
        self.client = client
        self.store = store
        self._adopted: dict[str, asyncio.Task[None]] = {}

    async def run(self) -> None:
        """Look for orphans until cancelled (then the adopted runs are left for another worker)."""
        try:
            while True:
                await self._look()
                await asyncio.sleep(ADOPT_EVERY_S)
        finally:
            for task in self._adopted.values():
                task.cancel()

    async def _look(self) -> None:
        try:
            found = await asyncio.to_thread(self.store.adopt_orphans, EXECUTOR)
        except StoreError as exc:
            logger.warning("worker: cannot look for orphaned runs", error=str(exc))
            return
        for run_id, kind, started_at in found:
            logger.info("worker: adopted a run whose front door stopped", run_id=run_id, kind=kind)
            task = asyncio.get_running_loop().create_task(self._end_retrying(run_id, kind, started_at))
            self._adopted[run_id] = task
            task.add_done_callback(functools.partial(self._forget, run_id))

    def _forget(self, run_id: str, _task: object) -> None:
        self._adopted.pop(run_id, None)

    async def _end_retrying(self, run_id: str, kind: str, started_at: int) -> None:
        """`_end`, tried again while Temporal or the store cannot be reached (the run stays adopted)."""
        while True:
            try:
                await self._end(run_id, kind, started_at)
                return
            except Exception as exc:  # noqa: BLE001 - Temporal or the database briefly away: try again
                logger.error("worker: cannot end an adopted run yet, trying again", run_id=run_id,
                             error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(ADOPT_EVERY_S * 5)

    async def _end(self, run_id: str, kind: str, started_at: int) -> None:
        from temporalio.client import WorkflowFailureError
        from temporalio.service import RPCError, RPCStatusCode

        handle = self.client.get_workflow_handle(run_id)
        try:
            call = await _started_with(self.client, handle)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            await self._interrupt(run_id, "the front door that started it stopped before its Temporal execution began")
            return
        try:
            outcome: dict[str, Any] | BaseException = await handle.result()
        except WorkflowFailureError as exc:
            outcome = exc
        if kind == "tool" and await self._still_running(run_id):  # (a retry of this must not write it twice)
            await self._write_end(run_id, call, started_at, outcome)
        else:
            await asyncio.to_thread(self.store.flush)
        await self._interrupt(run_id, f"its Temporal execution ended without ending the run ({_reason(outcome)})")

    async def _write_end(self, run_id: str, call: dict[str, Any], started_at: int,
                         outcome: dict[str, Any] | BaseException) -> None:
        """The execution's last events (which came with its end: the front door would have written
        them) and the call's last event, as the front door's router emits it (the run's row ends with it)."""
        stored = await asyncio.to_thread(self.store.events, run_id, after_seq=0)
        scrub = served().project.redactor.for_run()
        scrub(call.get("arguments"))  # the secrets its redaction knows, as the front door's Run knew them
        run = Run(run_id, [self.store.listener], scrub)
        for row in last_rows(outcome):  # redacted by the workflow's Run; a seq stored already stays as it is
            run.relay(row_event(run_id, row))
        run.number_after(stored[-1]["seq"] if stored else 0)
        metadata = {"duration_ms": max(0, int(time.time() * 1000) - started_at)}
        if isinstance(outcome, dict):
            run.emit("tool_call_result", {"ok": True, "data": outcome.get("output"), "metadata": metadata},
                     call.get("tool_call_id"))
        else:
            failure, _ = call_failure(outcome, run_id, call.get("tool", "?"), call.get("revision"))
            error = {"code": failure.code, "message": failure.message, "details": failure.details}
            run.emit("tool_call_error", {"ok": False, "error": error, "metadata": metadata}, call.get("tool_call_id"))
        await asyncio.to_thread(self.store.flush)

    async def _still_running(self, run_id: str) -> bool:
        record = await asyncio.to_thread(self.store.run, run_id)
        return record is not None and record.status == "running"

    async def _interrupt(self, run_id: str, message: str) -> None:
        """End the row as interrupted if nothing else ended it (no-op for an ended run)."""
        await asyncio.to_thread(self.store.flush)
        if await asyncio.to_thread(self.store.interrupt, run_id, message):
            logger.warning("worker: an adopted run was interrupted", run_id=run_id, reason=message)


async def _started_with(client: Any, handle: Any) -> dict[str, Any]:
    """The input the execution was started with (the call: tool_call_id, arguments…)."""
    history = await handle.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    values = await client.data_converter.decode(started.input.payloads)
    return values[0] if values and isinstance(values[0], dict) else {}


def _reason(outcome: Any) -> str:
    if isinstance(outcome, BaseException):
        cause = getattr(outcome, "cause", None) or outcome
        return getattr(cause, "message", None) or str(cause) or type(cause).__name__
    return "completed"

"""The front door's side of the Temporal backend.

The Engine asks the backend for the project a call runs on (`project_for`): the same project
with each tool's executor replaced by `RemoteTool`. So the router runs every
check of a call here, in the calling process, exactly as with the local backend (allowlist,
enabled, JSON Schema, confirmation, the tool's timeout), and emits the call's first and last
events; only the tool's body (a workflow's steps, or any other tool type's executor as one
activity) runs on the workers. `RemoteTool.execute` starts the
execution (workflow id = the run id) and relays its events, followed from the shared store,
to this run's listeners, so a timeline or an `--output events` stream looks as it does locally.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ...errors import ErrorCode, StepFailure, UsageError
from ...executors.workflow import LinkedStep
from ...runtime.events import Event, report_listener_failure
from ...runtime.router import confirm_call
from ...store.schema import EVENTS_CHANNEL
from ...telemetry.traces import carrier
from .config import TemporalConfig, connect, require_sdk, require_shared_store
from .protocol import CALL_WORKFLOW, EXECUTOR, REVISION_MISMATCH, STEP_FAILURE, WORKFLOW
from .revision import project_revision

if TYPE_CHECKING:
    from ..._engine import Engine
    from ...runtime.context import CallContext
    from ...runtime.project import LinkedTool, Project
    from ...runtime.run import Run
    from ...store.shared import SharedStore

CANCEL_WAIT_S = 15.0  # after a cancel, how long the front door waits for the execution to end
FOLLOW_POLL_S = 5.0  # the store is read this often even when no notice arrives (a lost notice costs ≤ this;
# notices are lost only with the listening connection, which says so: "*"). Every read of every call
# in flight costs the database: at 1 s, 100 concurrent calls on a loaded machine (each waiting ~30 s)
# read the store 72 times per call, 4 of them for a notice (bench.temporal --profile).


class TemporalBackend:
    """Runs workflow tools as Temporal executions; one per Engine."""

    name = "temporal"

    def __init__(self, store: "SharedStore", config: TemporalConfig) -> None:
        self.store = store
        self.config = config
        self._last: tuple[Project, Project] | None = None  # (linked project, its remote twin)
        self._client: tuple[asyncio.AbstractEventLoop, Any] | None = None

    @classmethod
    def for_engine(cls, engine: "Engine") -> "TemporalBackend":
        require_sdk()
        return cls(require_shared_store(engine.store), TemporalConfig.of(engine.project))

    def project_for(self, project: "Project") -> "Project":
        """`project` with its workflow tools run on Temporal (built once per linked project)."""
        last = self._last
        if last is not None and last[0] is project:
            return last[1]
        revision = project_revision(project)
        twin = copy.copy(project)  # shares the redactor, providers and settings; only `tools` differs
        twin.tools = {name: self._remote(tool, revision) if runs_on_workers(tool) else tool
                      for name, tool in project.tools.items()}
        self._last = (project, twin)
        return twin

    def _remote(self, tool: "LinkedTool", revision: str) -> "LinkedTool":
        remote = dataclasses.replace(tool, executor=RemoteTool(self, tool, revision))
        object.__setattr__(remote, "arguments_clean", tool.arguments_clean)  # init=False fields: as linked
        object.__setattr__(remote, "result_clean", tool.result_clean)
        return remote

    async def client(self) -> Any:
        """The Temporal client of the running event loop (connected on first use)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client[0] is not loop:
            try:
                self._client = (loop, await connect(self.config))
            except UsageError as exc:
                raise StepFailure(ErrorCode.EXECUTION_ERROR, str(exc)) from None
        return self._client[1]


def runs_on_workers(tool: "LinkedTool") -> bool:
    """Every tool of the project's files runs on the workers (a workflow tool as its workflow, any
    other as one activity: single.py); a tool created in the run store (admin API) is unknown to
    the workers, which link the files only, and runs here."""
    return not tool.source.startswith("store:")


class RemoteTool:
    """A tool's executor in a front door: the body runs as a Temporal execution."""

    def __init__(self, backend: TemporalBackend, tool: "LinkedTool", revision: str) -> None:
        self.backend = backend
        self.tool = tool
        self.local = tool.executor
        self.kind = tool.executor.kind
        self.workflow = WORKFLOW if self.kind == "workflow" else CALL_WORKFLOW
        self.revision = revision
        self.output_clean = getattr(tool.executor, "output_clean", None)
        self._confirmed: dict[str, tuple[Any, Follower]] = {}  # run id → its execution (ask_confirmation began it)
        # an agent step's tool calls may ask for confirmation: this front door's approver answers them
        # (plain steps only: a workflow with constructs runs in one activity, its agent steps in it)
        self.asks_inside = any(type(step) is LinkedStep and step.skill.kind == "agent" for step in getattr(self.local, "steps", ()))

    async def ask_confirmation(self, run: "CallContext", tool: "LinkedTool", args: dict[str, Any]) -> None:
        """A direct call's confirmation waits in its execution, started now (see confirmation.py):
        it outlives this front door and every worker. Returns once the execution has its answer
        (or ended); `execute` then follows it to its end (a no ends it `confirmation_denied`)."""
        if run.run.kind != "tool":  # an agent's calls share a run: asked here, as locally
            return await confirm_call(run, tool, args)
        from .confirmation import until_answered

        started = await self._start(args, run, confirm=True)
        self._confirmed[run.run_id] = started
        try:
            await until_answered(started[0], started[1], run, tool, args)
        except BaseException:  # cancelled, or this door's approver failed: the question goes with the call
            self._confirmed.pop(run.run_id, None)
            await asyncio.shield(cancel_and_wait(*started))
            raise

    async def execute(self, args: dict[str, Any], run: "CallContext") -> Any:
        if run.run.kind != "tool":  # an agent's calls share a run (and its seq): they stay local for now
            return await self.local.execute(args, run)
        from temporalio.client import WorkflowFailureError

        confirmed = self._confirmed.pop(run.run_id, None)
        handle, follower = confirmed if confirmed is not None else await self._start(args, run)
        answers = None
        if self.asks_inside:
            from .confirmation import Answers

            answers = Answers(run.project.tools, run.run, handle)
            follower.listeners.append(answers.heard)
        try:
            outcome = await follower.follow(asyncio.ensure_future(handle.result()))
        except WorkflowFailureError as exc:
            failure, last_seq = call_failure(exc, run.run_id, run.tool, self.revision)
            await follower.catch_up(last_seq, last_rows(exc))
            raise failure from None
        except asyncio.CancelledError:
            await asyncio.shield(cancel_and_wait(handle, follower))
            raise
        finally:
            if answers is not None:
                answers.close()
        await follower.catch_up(outcome["last_seq"], outcome.get("rows") or ())
        return _as_local(self.kind, outcome["output"])

    async def _start(self, args: dict[str, Any], run: "CallContext", confirm: bool = False) -> "tuple[Any, Follower]":
        """Start the call's execution (workflow id = the run id); its handle and the follower of its events."""
        client = await self.backend.client()
        first = run.run.last_seq + 1
        call = {"revision": self.revision, "run_id": run.run_id, "tool_call_id": run.tool_call_id, "tool": run.tool,
                "arguments": args, "model": run.model_override, "first_seq": first, "tool_timeout": self.tool.timeout,
                "trace": carrier(run.run_id, run.tool_call_id)}  # the worker's spans join this call's trace
        limit = self.tool.timeout + 60
        if confirm:
            call["confirm"], call["approval_timeout"] = True, run.run.approval_timeout
            limit += run.run.approval_timeout
        elif self.asks_inside:
            call["approval_timeout"] = run.run.approval_timeout
        self.backend.store.record_executor(run.run_id, EXECUTOR)  # if this process dies, a worker ends the run
        handle = await client.start_workflow(self.workflow, call, id=run.run_id, task_queue=self.backend.config.task_queue,
                                             execution_timeout=timedelta(seconds=limit))
        return handle, Follower(self.backend.store, run.run, first - 1)


def call_failure(exc: Any, run_id: str, tool: str, revision: str | None) -> "tuple[StepFailure, int | None]":
    """The one place a failed execution (temporalio's `WorkflowFailureError`) becomes a skillyard
    failure — for a tool call, an agent run (agent_client.py) and an adopted orphan (orphans.py):
    the StepFailure, and the last seq the execution wrote (None: unknown, read what is stored)."""
    from temporalio.exceptions import ApplicationError, CancelledError

    cause = exc.cause
    if isinstance(cause, ApplicationError) and cause.type == STEP_FAILURE and cause.details:
        info = cause.details[0]
        return StepFailure(info["code"], cause.message, info["details"] or {}), info["last_seq"]
    if isinstance(cause, CancelledError):  # cancelled from another front door (POST /v1/runs/{id}/cancel)
        return StepFailure(ErrorCode.CANCELLED, f"call of {tool!r} was cancelled"), None
    if isinstance(cause, ApplicationError) and cause.type == REVISION_MISMATCH:
        return StepFailure(ErrorCode.EXECUTION_ERROR, cause.message, {"revision": revision}), None
    return StepFailure(ErrorCode.EXECUTION_ERROR, f"the Temporal execution {run_id} failed: {cause or exc}"), None


def last_rows(ended: Any) -> list[list[Any]]:
    """The last events (numbered rows, not yet written) a call's execution ended with: from its
    result, or from its failure's details (protocol.ended, failure_details)."""
    if isinstance(ended, dict):
        return ended.get("rows") or []
    cause = getattr(ended, "cause", None)
    details = getattr(cause, "details", None)
    if getattr(cause, "type", None) == STEP_FAILURE and details and isinstance(details[0], dict):
        return details[0].get("rows") or []
    return []


def row_event(run_id: str, row: list[Any]) -> Event:
    seq, kind, ts, call_id, step_id, skill, data = row
    return Event(kind, run_id, seq, ts, call_id, step_id, skill, data)


def _as_local(kind: str, output: Any) -> Any:
    """The output as the local executor returns it: a fetch's data renders its own model text and
    metadata (status, bytes, URL), so a front door shows a remote fetch as a local one."""
    if kind == "fetch" and isinstance(output, dict):
        from ...executors.fetch.executor import FetchResult

        return FetchResult(output)
    return output


async def cancel_and_wait(handle: Any, follower: "Follower") -> None:
    """Cancel the execution (and its running activity); wait for its end so that no event of it
    lands after the call's own last one."""
    try:
        await handle.cancel()
        async with asyncio.timeout(CANCEL_WAIT_S):
            await asyncio.gather(handle.result(), return_exceptions=True)
    except Exception:  # noqa: BLE001 - the call is cancelled whatever Temporal says
        pass
    await follower.catch_up(None)


class Follower:
    """Relays a run's stored events, in seq order, to the front door's own listeners."""

    def __init__(self, store: "SharedStore", run: "Run", after: int) -> None:
        self.store = store
        self.run = run
        self.after = after
        self.listeners: list[Callable[[Event], None]] = []  # more listeners, beside the run's own

    async def follow(self, ended: "asyncio.Future[Any]") -> Any:
        """Relay events as they are stored until `ended` completes; its result."""
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        prefix = self.run.run_id + " "

        def heard(payload: str) -> None:
            if payload.startswith(prefix) or payload == "*":  # "*": notices may have been lost, read again
                loop.call_soon_threadsafe(wake.set)

        stop = self.store.listen(EVENTS_CHANNEL, heard)
        try:
            while not ended.done():
                woken = loop.create_task(wake.wait())
                await asyncio.wait((ended, woken), timeout=FOLLOW_POLL_S, return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                wake.clear()
                await self._relay()
            return ended.result()
        finally:
            stop()
            if not ended.done():
                ended.cancel()

    async def catch_up(self, last_seq: int | None, rows: "Sequence[list[Any]]" = ()) -> None:
        """Relay what is stored up to `last_seq` (None: whatever there is) and then `rows`, the
        execution's last events, which came with its end: they go to the run's listeners, the
        store's too (this front door writes them, with the call's last event), then number on."""
        stored_up_to = rows[0][0] - 1 if rows else last_seq
        if stored_up_to is None or self.after < stored_up_to:
            await self._relay()
        for row in rows:
            if row[0] > self.after:
                self._deliver(row_event(self.run.run_id, row), None)
        self.run.number_after(max(self.after, last_seq or 0))  # the call's last event follows the execution's

    async def _relay(self) -> None:
        rows = await asyncio.to_thread(self.store.events, self.run.run_id, after_seq=self.after)
        for row in rows:
            if row["seq"] != self.after + 1:  # not yet committed in order: the next read gets it
                break
            event = Event(row["type"], row["run_id"], row["seq"], row["ts"], row.get("tool_call_id"),
                          row.get("step_id"), row.get("skill"), row["data"])
            self._deliver(event, self.store.receives)  # the worker stored it already

    def _deliver(self, event: Event, skip: "Callable[[Any], bool] | None") -> None:
        self.after = event.seq
        self.run.relay(event, skip=skip)
        for listener in self.listeners:
            try:
                listener(event)
            except Exception as exc:  # noqa: BLE001 - as Run.relay: a listener's bug must not hurt the run
                report_listener_failure(listener, event.type, exc)

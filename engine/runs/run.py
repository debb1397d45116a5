"""The Run: one run's life, in one place.

A run is what users see (`skillyard runs`, `/v1/runs/{id}`): one tool call, or one agent
loop with its tool calls. Its `Run` owns

- its ids, kind, name and the principal that started it;
- its events: a gap-free `seq`, redaction done once per event before any listener (store,
  SSE followers, CLI timeline, an embedder's callback) sees it, and at most `max_events` of
  them (`limits.max_events_per_run`): the next one raises LimitExceeded in whoever emits it,
  and so does every later one, so the run stops and ends with `limit_exceeded`;
- its status, result and end (set by whoever runs it, by the one rule `end_status`; the
  hub's LiveRun reads them here, and the store derives a run's end by the same rule);
- its pending approvals, keyed by `tool_call_id`, answered through the Run from any front
  door (the terminal, MCP elicitation, `POST /v1/runs/{id}/approvals/{tool_call_id}`);
- its cancellation.

The `Engine` opens Runs (`Engine.open_run`) and keeps the live ones in `Engine.runs`, so a
front door that did not start a run can still answer or cancel it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from time import time_ns
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal, Protocol, TypeVar

import orjson

from ..errors import ErrorCode, LimitExceeded
from ..safety.redaction import scrub_text
from .events import (
    RUN_ENDING_EVENTS,
    Event,
    EventType,
    SyncListener,
    encode_data,
    new_event,
    report_listener_failure,
    wants_records,
)

if TYPE_CHECKING:
    from ..safety.redaction import RunScrubber, TextStream

RunKind = Literal["tool", "agent"]
RunStatus = Literal["running", "ok", "error", "cancelled", "interrupted"]


class ToolToApprove(Protocol):
    """What an approver is shown of the tool asking for confirmation: a `LinkedTool`
    (project.py), named here by what approvers read, since the Project sits above the Run."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...


class Failed(Protocol):
    """A call's outcome whose error message may quote arguments: a `ToolResult` (runtime/result.py)."""

    @property
    def error(self) -> Any: ...


_Outcome = TypeVar("_Outcome", bound=Failed)


# An approver answers yes or no; to a question asking for values (an MCP server's elicitation,
# `Run.ask_input`) it may answer with the values instead, which means yes.
Approver = Callable[[ToolToApprove, dict[str, Any], str], Awaitable["bool | dict[str, Any]"]]


def end_status(code: str | None) -> RunStatus:
    """How a run ended, from the code it stopped with: the one copy of this rule.

    `code` is a tool call's error code, or an agent's stop reason as `stop_code` gives it;
    None: the run did its job. No code: ok; `cancelled`: cancelled; any other: error. The
    engine (tool runs), the agent loop, the hub (a task that ended without its run) and the
    store (from a run's last event, store/rows.py) all end runs by it.
    """
    if code is None:
        return "ok"
    return "cancelled" if code == ErrorCode.CANCELLED else "error"


def stop_code(stop_reason: str | None) -> str | None:
    """An agent's stop reason as the code its run ended with: None when it answered."""
    return None if stop_reason == "answer" else stop_reason or "error"


def cancelled_error() -> dict[str, Any]:
    """The error of a run cancelled before it could say how it ended."""
    return {"code": ErrorCode.CANCELLED, "message": "the run was cancelled"}


async def wait_for_answer(tool: ToolToApprove, args: dict[str, Any], tool_call_id: str) -> bool:
    """The approver of a run that someone answers through `Run.answer` (the HTTP service):
    it asks nobody itself, so the Run waits for the answer, up to its approval timeout."""
    return await asyncio.Event().wait()  # never returns: the answer wins


# What a run past its event cap may still emit: its end (and an agent's reason for it), so the
# caller learns why it stopped and every sink sees the run end.
_PAST_THE_CAP = RUN_ENDING_EVENTS | {"agent_error"}


class _PassThrough:
    """The TextStream of a run without redaction."""

    @staticmethod
    def push(piece: str) -> str:
        return piece

    @staticmethod
    def flush() -> str:
        return ""


class Run:
    """One run: numbers, redacts and delivers its events; knows its state; takes answers."""

    __slots__ = (
        "run_id", "_seq", "_listeners", "_redact", "kind", "name", "principal", "status", "result", "error",
        "started_at", "finished_at", "approver", "approval_timeout", "_pending", "_task", "_on_end", "_records",
        "max_events", "_input_schemas", "watchers",
        "__weakref__",  # a model fallback finds the run of its request by a weak reference (providers/fallback.py)
    )

    def __init__(
        self,
        run_id: str,
        listeners: list[SyncListener],
        redact: "RunScrubber | None" = None,
        kind: RunKind = "tool",
        name: str = "",
        principal: str | None = None,
        approver: Approver | None = None,
        approval_timeout: float = 600.0,
        records: bool | None = None,
        max_events: int = 1 << 62,
        task: "asyncio.Task[Any] | None" = None,
    ):
        """`records`: whether a listener is a record sink (None: look at the listeners).
        `max_events`: the most events it may emit before its end. `task`: the task that executes
        the run (what `cancel` cancels; None: it is not running here)."""
        self.run_id = run_id
        self._seq = 0
        self._listeners = listeners
        self._redact = redact  # sensitive values never reach a listener
        # a sink (store, SSE, --output events) needs each event's JSON
        self._records = wants_records(listeners) if records is None else records
        self.kind = kind
        self.name = name
        self.principal = principal
        self.status: RunStatus = "running"
        self.result: Any = None  # a tool run's ToolResult, an agent run's answer
        self.error: dict[str, Any] | None = None
        self.started_at = time_ns() // 1_000_000
        self.finished_at: int | None = None
        self.approver = approver  # None: a confirmation nobody can give is denied at once
        self.approval_timeout = approval_timeout
        self._pending: dict[str, asyncio.Future[bool | dict[str, Any]]] = {}
        self._input_schemas: dict[str, dict[str, Any]] = {}  # pending questions that take values: their schema
        self._task = task
        self._on_end: list[Callable[["Run"], object]] = []  # what a callback returns is let go
        self.max_events = max_events
        # How many of its listeners show its events as they come (a timeline, an SSE follower, an
        # embedder's callback; not the store or metrics): set by whoever opens or follows the run.
        # The agent loop streams a model's answer only while one does (a plain answer costs less).
        self.watchers = 0

    # ─── events ──────────────────────────────────────────────────────────────────

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def scrubber(self) -> "RunScrubber | None":
        return self._redact

    def emit(
        self,
        type: EventType,
        data: dict[str, Any],
        tool_call_id: str | None = None,
        step_id: str | None = None,
        skill: str | None = None,
        result: Any = None,
        clean: bool = False,
    ) -> Event:
        """`clean=True`: the caller proved (from a closed schema) that `data` holds no sensitive key.
        `result`: what the run's work returned, on the event that ends it (a tool call's
        ToolResult, an agent's AgentResult).

        Every event type passes through the run's redaction here (text deltas included: a
        model may echo a password). When a listener is a record sink, the redacted data is
        encoded here, once, for all of them (`Event.data_json`); otherwise never.
        """
        seq = self._seq + 1
        if seq > self.max_events and type not in _PAST_THE_CAP:
            raise self._over_the_cap()  # not numbered: the seq stays gap-free
        self._seq = seq
        redact = self._redact
        if redact is not None:
            if not clean:
                data = redact(data)
            elif redact.regex is not None:  # clean data may still hold a value seen earlier (most runs know none)
                data = scrub_text(data, redact.regex)
        encoded = None
        if self._records:
            try:
                encoded = orjson.dumps(data, default=str)
            except Exception:  # noqa: BLE001 - non-string keys, or no fast encoding (the sinks then write their own)
                encoded = encode_data(data)
        event = new_event(Event, (type, self.run_id, seq, time_ns() // 1_000_000, tool_call_id, step_id, skill, data, result,
                                  encoded))
        for listener in self._listeners:
            try:
                listener(event)
            except Exception as exc:  # noqa: BLE001 - a listener's bug must not hurt the run
                report_listener_failure(listener, type, exc)
        return event

    def _over_the_cap(self) -> LimitExceeded:
        cap = self.max_events
        return LimitExceeded("limits.max_events_per_run", cap,
                             f"the run emitted {cap} events, its limit (limits.max_events_per_run in config/engine.yaml); "
                             "make the call smaller (fewer items), or raise the limit")

    def relay(self, event: Event, skip: Callable[[SyncListener], bool] | None = None) -> None:
        """An event numbered, redacted and stored elsewhere (a Temporal worker): deliver it to
        the listeners but those `skip` says yes to (the store's, that holds it already); the
        run numbers on after it."""
        if event.seq > self._seq:
            self._seq = event.seq
        for listener in self._listeners:
            if skip is None or not skip(listener):
                try:
                    listener(event)
                except Exception as exc:  # noqa: BLE001 - as emit: a listener's bug must not hurt the run
                    report_listener_failure(listener, event.type, exc)

    def redirect(self, listener: SyncListener, to: SyncListener) -> None:
        """Deliver this run's later events to `to` instead of `listener` (one that takes a run
        whole hands it back at its end, or changes how it takes it); no-op if it is not here."""
        listeners = self._listeners
        with contextlib.suppress(ValueError):
            listeners[listeners.index(listener)] = to

    def number_after(self, seq: int) -> None:
        """The run's next event follows `seq` (events up to it were numbered elsewhere)."""
        if seq > self._seq:
            self._seq = seq

    def scrub_text(self, text: str) -> str:
        """Free text (an error message bound for the caller) without the run's known secrets."""
        return text if self._redact is None else self._redact.text(text)

    def scrub_error(self, result: _Outcome) -> _Outcome:
        """`result` with the run's known secrets hidden in its error message (bound for HTTP bodies).

        The data of a successful call is the caller's and stays whole; an error message is a
        diagnostic that may quote arguments (`login failed for bob with <password>`).
        """
        error = result.error
        if error is None or self._redact is None:
            return result
        message = self._redact.text(error.message)
        if message is error.message:
            return result
        return dataclasses.replace(result, error=dataclasses.replace(error, message=message))  # type: ignore[type-var]  # a ToolResult: a dataclass

    def text_stream(self) -> "TextStream | _PassThrough":
        """For streamed text events: holds back a tail that may be the start of a known secret."""
        return _PassThrough() if self._redact is None else self._redact.stream()

    # ─── state and end ───────────────────────────────────────────────────────────

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    def on_end(self, callback: Callable[["Run"], object]) -> None:
        """Call `callback(run)` once the run has ended (at once if it has)."""
        if self.done:
            callback(self)
        else:
            self._on_end.append(callback)

    def finish(self, status: RunStatus, result: Any = None, error: dict[str, Any] | None = None) -> None:
        """Record the end (the first call wins); pending approvals are closed as denied."""
        if self.finished_at is not None:
            return
        self.status, self.result, self.error = status, result, error
        self.finished_at = time_ns() // 1_000_000
        if self._pending:
            for future in self._pending.values():
                if not future.done():
                    future.set_result(False)
            self._pending.clear()
        callbacks, self._on_end = self._on_end, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception as exc:  # noqa: BLE001 - an observer's bug must not hurt the run
                report_listener_failure(callback, "run_end", exc)

    def crash(self, exc: BaseException) -> None:
        """End the run in error because its work raised `exc` (a bug: the router answers a
        bad call, it never raises one); no-op if it has ended. The message hides the run's
        known secrets."""
        self.finish("error", error={"code": ErrorCode.SERVER_ERROR,
                                    "message": self.scrub_text(f"{type(exc).__name__}: {exc}")})

    def cancel(self) -> bool:
        """Cancel the task executing the run; False when it is not running (or not here)."""
        task = self._task
        if task is None or task.done() or self.done:
            return False
        task.cancel()
        return True

    # ─── approvals ───────────────────────────────────────────────────────────────

    @property
    def pending_approvals(self) -> list[str]:
        return sorted(call for call, future in self._pending.items() if not future.done())

    async def ask_approval(self, tool: ToolToApprove, args: dict[str, Any], tool_call_id: str) -> bool:
        """Wait for a yes or no to one call: from the run's approver (a person at a terminal,
        an MCP client) or from `answer` (any other front door), whichever comes first.

        No approver: denied at once (nobody could answer). No answer within the approval
        timeout: denied.
        """
        answer = await self._wait_for_answer(tool, args, tool_call_id)
        return answer is True or isinstance(answer, dict)

    async def ask_input(self, tool: ToolToApprove, question: dict[str, Any], tool_call_id: str,
                        schema: dict[str, Any]) -> bool | dict[str, Any]:
        """Like `ask_approval`, for a question that takes values of `schema` (an MCP server's
        elicitation): False (declined), True (accepted as is) or the values given."""
        self._input_schemas[tool_call_id] = schema
        try:
            return await self._wait_for_answer(tool, question, tool_call_id)
        finally:
            self._input_schemas.pop(tool_call_id, None)

    def pending_input_schema(self, tool_call_id: str) -> dict[str, Any] | None:
        """The schema of the values a pending question takes (None: a plain yes or no)."""
        return self._input_schemas.get(tool_call_id) if tool_call_id in self.pending_approvals else None

    async def _wait_for_answer(self, tool: ToolToApprove, args: dict[str, Any], tool_call_id: str) -> bool | dict[str, Any]:
        if self.approver is None:
            return False
        future: asyncio.Future[bool | dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[tool_call_id] = future
        asked = asyncio.ensure_future(self.approver(tool, args, tool_call_id))
        try:
            async with asyncio.timeout(self.approval_timeout):
                done, _ = await asyncio.wait((future, asked), return_when=asyncio.FIRST_COMPLETED)
            answer = future.result() if future in done else asked.result()
            return answer if isinstance(answer, dict) else bool(answer)
        except TimeoutError:
            return False
        finally:
            if not asked.done():
                asked.cancel()
            if self._pending.get(tool_call_id) is future:
                del self._pending[tool_call_id]

    def answer(self, tool_call_id: str, approve: bool, values: dict[str, Any] | None = None) -> bool:
        """Answer a pending approval (with `values` for a question that takes them, already
        checked against its schema); False when none is pending under that id."""
        future = self._pending.get(tool_call_id)
        if future is None or future.done():
            return False
        future.set_result(values if approve and values is not None else approve)
        return True

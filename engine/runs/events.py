"""Events: the only side channel of the runtime.

Runtime code emits; it never prints, writes files or knows who listens. Every event shares
one envelope (`Event`) with a `type` from `EventType`. Within one run `seq` counts 1, 2, 3…
with no gaps, whoever listens.

The `Run` (run.py) numbers, redacts and delivers a run's events. Listeners are plain callables `(Event) -> None` or async callables. A sync listener runs
inline and must be quick; an async listener gets its own queue and task, so a slow one
cannot hold up the others, and nothing is dropped for it. A listener that raises is logged
and keeps receiving later events; the others never notice.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import types
from collections import namedtuple
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Literal,
    Mapping,
    ParamSpec,
    TypeVar,
    Union,
)

import orjson

from ..logging import logger

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # typing's own from Python 3.13


EventType = Literal[
    "agent_start",
    "history_trimmed",
    "model_call_start",
    "model_reasoning_delta",
    "model_reasoning_done",
    "model_text_delta",
    "tool_call_start",
    "tool_progress_delta",
    "skill_start",
    "skill_progress_delta",
    "skill_result",
    "skill_error",
    "model_exchange",
    "model_fallback",
    "tool_call_result",
    "tool_call_error",
    "confirmation_required",
    "input_required",  # an MCP server asks for input during a call (answered like an approval)
    "final_answer_delta",
    "answer_invalid",  # a typed answer did not match the agent's output schema: a repair turn follows
    "agent_error",
    "agent_done",
]

TERMINAL_TOOL_EVENTS = frozenset({"tool_call_result", "tool_call_error"})
RUN_ENDING_EVENTS = TERMINAL_TOOL_EVENTS | {"agent_done"}  # what may end a run (a tool call's, or an agent's)


_EventFields = namedtuple(
    "_EventFields",
    ["type", "run_id", "seq", "ts", "tool_call_id", "step_id", "skill", "data", "result", "data_json"],
    defaults=(None, None, None, {}, None, None),
)


class Event(_EventFields):
    """One thing that happened in a run. `result` is set on the terminal tool event (the
    ToolResult) and on `agent_done` (the AgentResult: a cancelled run's partial one too).

    Fields: `type` (an EventType), `run_id`, `seq`, `ts` (milliseconds since the epoch),
    `tool_call_id`, `step_id`, `skill`, `data` (read-only for listeners), `result`, and
    `data_json`: the event's encoded record, its data as JSON bytes, encoded once by the Run
    for every sink that needs it (see `record_sink`) — the store keeps it as is, the SSE
    stream and `--output events` write `json()` around it. None when no sink of the run
    needs it, or when no fast encoding exists (a lone surrogate, nesting past 255 levels,
    an integer beyond 64 bits: each sink then writes its own fallback).
    An immutable named tuple, built in one C call by `new_event` (see there for what it buys).
    Read it by field name: its order is this module's business.
    """

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "run_id": self.run_id, "seq": self.seq, "ts": self.ts}
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.step_id is not None:
            out["step_id"] = self.step_id
        if self.skill is not None:
            out["skill"] = self.skill
        out["data"] = self.data
        return out

    @classmethod
    def from_dict(cls, event: "Mapping[str, Any]") -> "Event":
        """The Event of its dict (`to_dict()`'s form: a stored event), without encoded data."""
        return cls(event["type"], event["run_id"], event["seq"], event["ts"], event.get("tool_call_id"),
                   event.get("step_id"), event.get("skill"), event.get("data"))

    def json(self) -> bytes | None:
        """`to_dict()` as compact JSON bytes, built around `data_json` (put in as an
        `orjson.Fragment`: the data is not encoded again, only the few short envelope fields
        are); None when no fast encoding exists."""
        data = self.data_json
        if data is None:
            data = encode_data(self.data)
            if data is None:
                return None
        head: dict[str, Any] = {"type": self.type, "run_id": self.run_id, "seq": self.seq, "ts": self.ts}
        if self.tool_call_id is not None:
            head["tool_call_id"] = self.tool_call_id
        if self.step_id is not None:
            head["step_id"] = self.step_id
        if self.skill is not None:
            head["skill"] = self.skill
        head["data"] = orjson.Fragment(data)
        try:
            return orjson.dumps(head)
        except (TypeError, orjson.JSONEncodeError):  # a lone surrogate in an id
            return None


# Event from a ready tuple, `new_event(Event, (type, run_id, …))`: one C call, where the named
# tuple's own constructor runs a Python frame per event (the Run builds 17+ per tool call).
# What it buys, by `python -m bench.opcodes` (3-step routed call, bytecodes per call, same
# session): 3,323 with it, 3,561 with `Event(...)`: 6.7 %. (A dataclass's `__init__` would
# run more Python per event than the named tuple's constructor.)
new_event = tuple.__new__


def encode_data(data: Any) -> bytes | None:
    """An event's data as compact JSON bytes (non-JSON values as their str); None when orjson
    cannot write it. Non-string keys cost orjson more: tried only when the plain call fails."""
    try:
        return orjson.dumps(data, default=str)
    except (TypeError, orjson.JSONEncodeError):
        pass
    try:
        return orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # a lone surrogate, too deep, an integer beyond 64 bits
        return None


_L = TypeVar("_L")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def record_sink(listener: Callable[_P, _R]) -> Callable[_P, _R]:
    """Mark `listener` as a sink of records: the runs it listens to encode `Event.data_json`
    (once, shared with every other sink). Runs without such a listener encode nothing.
    A callable that takes no attributes (a builtin such as `list.append`) comes back wrapped."""
    try:
        listener.wants_records = True  # type: ignore[attr-defined]  # a marker attribute, set on whatever callable takes one
        return listener
    except AttributeError:
        pass

    def forward(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return listener(*args, **kwargs)

    forward.wants_records = True  # type: ignore[attr-defined]  # the same marker, on the wrapper
    return forward


def quiet(listener: _L) -> _L:
    """Mark `listener` as one that never shows a run's events as they come (it counts or records
    them: metrics, traces, the store): a run it alone listens to has no watcher (Run.watchers)."""
    listener.quiet = True  # type: ignore[attr-defined]  # a marker attribute on a function or object
    return listener


def watches(listener: Any) -> bool:
    """Whether `listener` (or the listener a QueuedListener wraps) shows events as they come:
    any listener not marked `quiet` (an embedder's callback, the CLI timeline, a stream)."""
    return not (getattr(listener, "quiet", False) or getattr(getattr(listener, "listener", None), "quiet", False))


def wants_records(listeners: "Iterable[Any]") -> bool:
    """Whether one of `listeners` (or the listener a QueuedListener wraps) is a record sink."""
    for listener in listeners:
        if getattr(listener, "wants_records", False) or getattr(getattr(listener, "listener", None), "wants_records", False):
            return True
    return False


SyncListener = Callable[[Event], None]
AsyncListener = Callable[[Event], Awaitable[None]]
Listener = Union[SyncListener, AsyncListener]


def _listener_name(listener: Any) -> str:
    return getattr(listener, "__qualname__", None) or type(listener).__name__


def report_listener_failure(listener: Any, event_type: str, exc: Exception) -> None:
    """One log line per failure; the listener keeps receiving later events."""
    logger.error(
        "event listener failed",
        listener=_listener_name(listener),
        event_type=event_type,
        error=f"{type(exc).__name__}: {exc}",
    )


class QueuedListener:
    """Runs an async listener on its own task, fed by an unbounded queue (nothing dropped)."""

    def __init__(self, listener: AsyncListener):
        self.listener = listener
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._drain())

    def __call__(self, event: Event) -> None:
        self.queue.put_nowait(event)

    async def _drain(self) -> None:
        while (event := await self.queue.get()) is not None:
            try:
                await self.listener(event)
            except Exception as exc:  # noqa: BLE001 - a listener's bug must not hurt the run
                report_listener_failure(self.listener, event.type, exc)

    async def close(self) -> None:
        """Deliver what is queued, then stop."""
        self.queue.put_nowait(None)
        await self.task


_ASYNC_CALLABLE_TYPES: dict[type, bool] = {}


def is_async_listener(listener: Any) -> "TypeIs[AsyncListener]":
    """Cheap checks first (plain functions, builtins, known callable classes): it runs on every call."""
    code = getattr(listener, "__code__", None)
    if code is not None:
        return bool(code.co_flags & inspect.CO_COROUTINE)
    if isinstance(listener, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return False
    kind = type(listener)
    known = _ASYNC_CALLABLE_TYPES.get(kind)
    if known is None:
        known = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(kind.__call__)
        if not isinstance(listener, (types.MethodType, functools.partial)) and len(_ASYNC_CALLABLE_TYPES) < 1024:
            _ASYNC_CALLABLE_TYPES[kind] = known  # instances of one class share their __call__ (a call looks it up on the class)
    return known


def prepare_listeners(listeners: list[Listener]) -> tuple[list[SyncListener], list[QueuedListener]]:
    """Split listeners into inline ones and queued async ones (which need closing)."""
    inline: list[SyncListener] = []
    queued: list[QueuedListener] = []
    for listener in listeners:
        if is_async_listener(listener):
            q = QueuedListener(listener)
            queued.append(q)
            inline.append(q)
        else:
            inline.append(listener)
    return inline, queued


async def stream_run(
    start: Callable[[SyncListener], Coroutine[Any, Any, Any]], is_last: Callable[[Event], bool]
) -> "AsyncIterator[Event]":
    """Run `start(listener)` as a task and yield its events until `is_last(event)`.

    Leaving the iteration early cancels the run; nothing is dropped before that.
    """
    queue: asyncio.Queue[Event] = asyncio.Queue()
    task = asyncio.get_running_loop().create_task(start(queue.put_nowait))
    try:
        while True:
            event = await queue.get()
            yield event
            if is_last(event):
                break
        await task
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

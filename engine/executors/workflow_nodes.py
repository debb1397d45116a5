"""The workflow constructs beyond a plain step: `when`, `forEach`, `workflow:` and `parallel`.

Built by the linker (everything decided at load), run by `WorkflowExecutor.execute`, which
runs plain steps through `call_step` and awaits `node.run(args, outputs, run)` for these. A node stores its
output under its step id in `outputs` (a skipped step stores nothing: its output is absent).

Cancellation is real: a parallel group's members and a forEach step's items run as asyncio
tasks, and the first failure (or the caller's own cancellation) cancels the rest and waits
for them before the failure goes on.

Each forEach item runs with an `ItemRun`: the same call, but every event emitted in the item
(skill events, skill progress, model exchanges, a sub-workflow's events) says `item_index`.

A forEach step takes at most `max_items` items (its own, or `limits.max_items`): more fails the
call with `limit_exceeded` before any item runs. A limit (LimitExceeded) is never an item's
failure: it stops the call whatever `onItemError` says. Items whose skills never wait still let
the event loop turn, at least every YIELD_EVERY × concurrency items (the workers take turns),
so other requests are served meanwhile.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import LimitExceeded, StepFailure
from ..lang.conditions import Condition
from ..lang.mapping import INDEX, ITEM, MISSING, MappingError, Resolver
from ..runtime.context import CallContext
from ..runtime.timing import elapsed_ms, perf_counter_ns
from .workflow import LinkedStep, WorkflowExecutor, call_step

_SKIPPED: Any = object()  # an item left out of a forEach output
YIELD_EVERY = 64  # each worker lets the loop turn after this many items (a mask: a power of two)


@dataclass(frozen=True, slots=True)
class SubWorkflow:
    """`workflow: <name>` in a step: the mapped input becomes the sub-workflow's `$toolArgs`."""

    id: str
    event_id: str
    resolve_input: Resolver
    executor: WorkflowExecutor

    async def call(self, args: dict[str, Any], outputs: dict[str, Any], run: CallContext) -> Any:
        try:
            value = self.resolve_input(args, outputs)
        except MappingError as exc:
            raise StepFailure("execution_error", f"step {self.id!r} input: {exc}") from None
        return await self.executor.execute({} if value is MISSING else value, run)


Unit = LinkedStep | SubWorkflow


async def _call(unit: Unit, args: dict[str, Any], outputs: dict[str, Any], run: CallContext) -> Any:
    if type(unit) is LinkedStep:
        return await call_step(unit, args, outputs, run)
    return await unit.call(args, outputs, run)  # type: ignore[union-attr]  # not a LinkedStep (`type is`: no isinstance per step)


class ItemEvents:
    """The run's events as one forEach item emits them: each event's data also says `item_index`
    (an inner forEach's item, nested in this one, keeps its own)."""

    __slots__ = ("_events", "index")

    def __init__(self, events: Any, index: int):
        self._events = events
        self.index = index

    def emit(self, type: Any, data: dict[str, Any], tool_call_id: str | None = None, step_id: str | None = None,
             skill: str | None = None, result: Any = None, clean: bool = False) -> Any:
        if "item_index" not in data:
            data = {**data, "item_index": self.index}
        return self._events.emit(type, data, tool_call_id, step_id, skill, result, clean)

    def __getattr__(self, name: str) -> Any:  # scrub_text, ask_approval, …: the run's own
        return getattr(self._events, name)


class ItemRun(CallContext):
    """The call as one forEach item sees it: its events are marked with the item (ItemEvents);
    usage adds up on the call's own context."""

    __slots__ = ("_call",)

    def __init__(self, run: CallContext, index: int):  # not super().__init__: it would reset the usage
        self._call = run
        self.run_id = run.run_id
        self.tool_call_id = run.tool_call_id
        self.tool = run.tool
        self.run = ItemEvents(run.run, index)  # type: ignore[assignment]  # stands in for the Run, marking each event
        self.project = run.project
        self.model_override = run.model_override

    @property
    def usage(self) -> Any:
        return self._call.usage

    @usage.setter
    def usage(self, value: Any) -> None:
        self._call.usage = value


@dataclass(frozen=True, slots=True)
class ForEach:
    items: Resolver  # the array
    concurrency: int
    on_item_error: Literal["fail", "skip", "collect"]
    max_items: int
    limit_name: str  # "limits.max_items" (the engine's setting), or "max_items": the step's own (lower)

    def check_count(self, step_id: str, count: int) -> None:
        """LimitExceeded when the array has more items than the step may take."""
        if count > self.max_items:
            where = ("limits.max_items in config/engine.yaml" if self.limit_name == "limits.max_items"
                     else "the step's own max_items")
            raise LimitExceeded(self.limit_name, self.max_items,
                                f"step {step_id!r}: forEach over {count} items, more than max_items {self.max_items} "
                                f"({where}); make the input smaller, or raise the limit")


@dataclass(slots=True)
class Step:
    """A step with `when`, `forEach` and/or `workflow:` (or a plain step inside a parallel group)."""

    id: str
    event_id: str
    unit: Unit
    number: int
    total: int
    condition: Condition | None = None
    for_each: ForEach | None = None
    leaf_ids: tuple[str, ...] = ()
    _started: dict[str, Any] = field(default_factory=dict)
    _skipped: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.leaf_ids = (self.id,)
        where = f"step {self.number} of {self.total}"
        runs = f" (workflow {self.unit.executor.name})" if type(self.unit) is SubWorkflow else ""
        self._started = {"stage": "step_started", "message": f"{where} started: {self.id}{runs}", "step": self.number,
                         "of": self.total, "step_id": self.event_id}
        if type(self.unit) is SubWorkflow:
            self._started["workflow"] = self.unit.executor.name
        if self.condition is not None:
            self._skipped = {"stage": "step_skipped", "message": f"{where} skipped: {self.id} (when: {self.condition.text})",
                             "step": self.number, "of": self.total, "step_id": self.event_id,
                             "condition": self.condition.text}

    def runs_beside(self, group: list[str]) -> None:
        """A member of a parallel group: its progress says which steps run at the same time."""
        self._started["parallel"] = group
        if self._skipped:
            self._skipped["parallel"] = group

    def clean(self, step_id: str) -> bool:
        """Whether its output is provably free of sensitive keys (decided by the Project after link)."""
        return type(self.unit) is LinkedStep and self.unit.skill.output_clean

    async def run(self, args: dict[str, Any], outputs: dict[str, Any], run: CallContext) -> Any:
        emit = run.run.emit
        call_id = run.tool_call_id
        condition = self.condition
        if condition is not None and not (self.for_each is not None and condition.uses_item) and not condition.holds(args, outputs):
            emit("tool_progress_delta", self._skipped, call_id, None, None, None, True)
            return None
        started = perf_counter_ns()
        try:
            if self.for_each is None:
                emit("tool_progress_delta", self._started, call_id, None, None, None, True)
                output = await _call(self.unit, args, outputs, run)
            else:
                output = await self._each(self.for_each, args, outputs, run)
        except asyncio.CancelledError:
            emit("tool_progress_delta", {"stage": "step_cancelled", "message": f"step {self.id} cancelled",
                                         "step_id": self.event_id}, call_id, None, None, None, True)
            raise
        outputs[self.id] = output
        emit("tool_progress_delta",
             {"stage": "step_finished", "message": f"step {self.number} of {self.total} finished: {self.id}",
              "step": self.number, "of": self.total, "step_id": self.event_id, "duration_ms": elapsed_ms(started)},
             call_id, None, None, None, True)
        return output

    async def _each(self, spec: ForEach, args: dict[str, Any], outputs: dict[str, Any], run: CallContext) -> list[Any]:
        """Every item through the unit, at most `concurrency` at once; the outputs in input order."""
        emit = run.run.emit
        call_id = run.tool_call_id
        try:
            items = spec.items(args, outputs)
        except MappingError as exc:
            raise StepFailure("execution_error", f"step {self.id!r} forEach: {exc}") from None
        if items is MISSING:
            items = []
        if not isinstance(items, list):
            raise StepFailure("execution_error", f"step {self.id!r}: forEach needs an array, got {type(items).__name__}")
        total = len(items)
        spec.check_count(self.id, total)
        emit("tool_progress_delta", {**self._started, "items_total": total}, call_id, None, None, None, True)
        results: list[Any] = [_SKIPPED] * total
        positions = iter(range(total))  # shared by the workers: each item is taken once
        done = itertools.count(1)
        condition = self.condition if self.condition is not None and self.condition.uses_item else None  # per item
        unit = self.unit
        mode = spec.on_item_error
        event_id = self.event_id

        async def worker() -> None:
            scope = dict(outputs)  # the outputs of earlier steps, plus this worker's current item
            for index in positions:
                scope[ITEM] = items[index]
                scope[INDEX] = index
                if condition is None or condition.holds(args, scope):
                    try:
                        # its own ItemRun: a skill's late event (a thread that outlived its timeout) keeps its item
                        output = await _call(unit, args, scope, ItemRun(run, index))
                    except LimitExceeded:
                        raise  # the call's limit, not the item's failure: onItemError does not apply
                    except StepFailure as error:
                        if mode == "fail":
                            raise StepFailure(error.code, f"step {self.id!r} item {index}: {error.message}",
                                              {**error.details, "item_index": index}) from None
                        if mode == "collect":
                            results[index] = {"ok": False, "error": {"code": error.code, "message": error.message}}
                    else:
                        results[index] = {"ok": True, "output": output} if mode == "collect" else output
                finished = next(done)
                emit("tool_progress_delta",
                     {"stage": "item_finished", "message": f"step {self.id}: {finished} of {total} items done",
                      "step_id": event_id, "item_index": index, "items_done": finished, "items_total": total},
                     call_id, None, None, None, True)
                if not finished & (YIELD_EVERY - 1):  # items that never wait must not hold the loop for long
                    await asyncio.sleep(0)

        workers = min(spec.concurrency, total)
        if workers == 1:
            await worker()
        elif workers > 1:
            await run_all([worker() for _ in range(workers)])
        return [result for result in results if result is not _SKIPPED]


@dataclass(slots=True)
class Parallel:
    """`parallel: [steps…]`: members run at the same time; one failure cancels the others."""

    members: list[Step]
    id: str = ""
    leaf_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.leaf_ids = tuple(member.id for member in self.members)
        self.id = "+".join(self.leaf_ids)
        group = [member.event_id for member in self.members]
        for member in self.members:
            member.runs_beside(group)

    def clean(self, step_id: str) -> bool:
        return any(member.id == step_id and member.clean(step_id) for member in self.members)

    async def run(self, args: dict[str, Any], outputs: dict[str, Any], run: CallContext) -> Any:
        await run_all([member.run(args, outputs, run) for member in self.members])
        return None


async def run_all(coroutines: list[Any]) -> None:
    """Run the coroutines as tasks; the first failure cancels the others (and is raised once
    they have stopped); cancelling the caller cancels them all."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError:
        await _cancel(tasks)
        raise
    # every finished task's exception is retrieved (asyncio would print the others' tracebacks)
    errors = [task.exception() for task in tasks if task.done() and not task.cancelled()]
    failed = next((error for error in errors if error is not None), None)
    if failed is not None:
        await _cancel(list(pending))
        raise failed
    if any(task.cancelled() for task in done):
        raise asyncio.CancelledError()


async def _cancel(tasks: list[asyncio.Future[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

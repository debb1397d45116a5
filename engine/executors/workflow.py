"""The workflow executor: run steps in order, mapping inputs from arguments and earlier outputs.

A plain step (a skill, no `when`/`forEach`/`workflow`) runs through `call_step`, the one copy
of a step's attempts: its input check, the skill call (`LinkedStep.attempt`), its `retry`
(`RetryPolicy`) and the events around each attempt. Every path runs it: this executor, the
constructs (engine/executors/workflow_nodes.py: any other entry of `steps` is a node compiled
at link time that runs itself, `await node.run(…)`), and the Temporal backend, whose workflow
runs this executor with each attempt's skill call as an activity on a worker, where
`LinkedStep.attempt` runs the skill (engine/backends/temporal/workflows.py, activities.py).
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from ..errors import StepFailure
from ..lang.mapping import MISSING, MappingError, Reference, Resolver, mapping_is_clean
from ..lang.schema import Violation
from ..runtime.context import CallContext, SkillContext
from ..runtime.contracts import Skill
from ..runtime.deadlines import deadline
from ..runtime.timing import PLAIN_TYPES, elapsed_ms, perf_counter_ns
from ..safety.user_frames import failure_details


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """A step's `retry:`, the rule every path applies: a failed attempt is tried again while
    attempts are left and its failure is retryable (a timeout, a skill's bug, a StepFailure
    raised as retryable), after `delay` seconds, twice as long before each later attempt."""

    times: int  # attempts after the first
    delay: float  # seconds between the first attempt and the second
    # How to wait between attempts. A Temporal workflow (which runs this executor) passes its own:
    # write the events so far, then wait on a durable timer.
    wait: Callable[[float], Awaitable[Any]] = asyncio.sleep

    def will_retry(self, error: StepFailure, attempt: int) -> bool:
        """Whether failed attempt number `attempt` (1 for the first) is followed by another."""
        return attempt <= self.times and error.retryable

    def delay_for(self, attempt: int) -> float:
        """Seconds between failed attempt number `attempt` and the next one."""
        return self.delay * 2 ** (attempt - 1)

    def pause(self, attempt: int) -> Awaitable[Any]:
        """The wait after failed attempt number `attempt`."""
        return self.wait(self.delay_for(attempt))


@dataclass(frozen=True, slots=True)
class LinkedStep:
    """A plain step: one skill, its compiled input mapping, its limits."""

    id: str
    skill: Skill
    resolve_input: Resolver
    timeout: float | None
    retry: RetryPolicy
    event_id: str = ""  # the step_id its events carry: its id, or `parent/id` inside a sub-workflow

    def __post_init__(self) -> None:
        if not self.event_id:
            object.__setattr__(self, "event_id", self.id)

    @property
    def output_clean(self) -> bool:
        return self.skill.output_clean

    async def attempt(self, value: Any, ctx: SkillContext | None, call: Callable[[Any, Any], Any]) -> Any:
        """One attempt's output: the skill called with its context under the step's timeout, its
        output checked against the skill's schema. Raises what the skill raises (see `failure`).
        `call`: the skill's `call` (a Temporal worker's calls sync code off its event loop)."""
        if self.timeout is None:
            output = call(value, ctx)
            if type(output) not in PLAIN_TYPES and inspect.isawaitable(output):
                output = await output
        else:
            with deadline(self.timeout):
                output = call(value, ctx)
                if type(output) not in PLAIN_TYPES and inspect.isawaitable(output):
                    output = await output
        schema = self.skill.output_schema
        if schema is not None and not schema.is_valid(output):
            raise _invalid_output(self.skill, schema.check(output))
        return output

    def failure(self, exc: Exception) -> StepFailure:
        """What a failed attempt means: the skill's own StepFailure, a timeout, or a bug (both retryable)."""
        if isinstance(exc, StepFailure):
            return exc
        if isinstance(exc, TimeoutError):
            limit = f"longer than {self.timeout:g}s" if self.timeout is not None else "too long (the skill raised TimeoutError)"
            return StepFailure("timeout", f"step {self.id!r} took {limit}", retryable=True)
        details = failure_details(exc, getattr(self.skill, "user_roots", ()))  # the user's frames (engine/safety/user_frames.py)
        return StepFailure("execution_error", f"skill {self.skill.name!r} raised {type(exc).__name__}: {exc}", details,
                           retryable=True)


class StepNode(Protocol):
    """A step that is not plain (or a parallel group): it runs itself and stores its output(s)."""

    id: str
    leaf_ids: tuple[str, ...]  # the step ids whose outputs it stores

    def run(self, args: dict[str, Any], outputs: dict[str, Any], run: CallContext) -> Awaitable[Any]: ...

    def clean(self, step_id: str) -> bool: ...


class WorkflowExecutor:
    kind = "workflow"

    def __init__(self, name: str, steps: list[Any], resolve_output: Resolver | None, output_mapping: Any = None, *,
                 caller: str | None = None):
        """`steps`: LinkedStep or StepNode entries. `caller`: the event id of the step that runs
        this workflow as a sub-workflow (its prepared / done events then carry it as `step_id`).

        Steps are numbered once, here, as "step k of N": N counts every step as written, the
        members of a parallel group included, and k is a step's place in that count.
        """
        self.name = name
        self.steps = steps
        self.resolve_output = resolve_output
        self.output_mapping = output_mapping  # as written; resolve_output is its compiled form
        # True when some entry is not a plain step (a backend that only runs plain steps checks it).
        self.has_constructs = any(type(step) is not LinkedStep for step in steps)
        numbers, count = [], 0
        for step in steps:
            numbers.append(count + 1)
            count += len(getattr(step, "leaf_ids", (step.id,)))
        self.total = total = count
        # Progress payloads are the same for every call: built once here, never per call.
        # (Event data is read-only for listeners, so sharing these dicts is safe.)
        where = {} if caller is None else {"step_id": caller}
        self._prepared = {"stage": "prepared", "message": f"workflow {name!r} prepared: {total} steps", "workflow": name, "steps": total, **where}
        self._done = {"stage": "done", "message": f"workflow {name!r} done", "workflow": name, **where}
        self._started = [
            {"stage": "step_started", "message": f"step {k} of {total} started: {step.id}", "step": k, "of": total, "step_id": getattr(step, "event_id", step.id)}
            for k, step in zip(numbers, steps, strict=True)
        ]
        self._finished = [f"step {k} of {total} finished: {step.id}" for k, step in zip(numbers, steps, strict=True)]
        self._numbers = numbers

    def output_clean(self, arguments_clean: bool, key_ok: Callable[[str], bool]) -> bool:
        """Whether the data of every call is provably free of sensitive keys (see Project)."""
        if self.resolve_output is None:
            if not self.steps:
                return True
            last = self.steps[-1]
            return last.output_clean if type(last) is LinkedStep else last.clean(last.id)
        owners = {leaf: step for step in self.steps for leaf in getattr(step, "leaf_ids", (step.id,))}

        def source_clean(ref: Reference) -> bool:
            if ref.source == "toolArgs":
                return arguments_clean
            owner = owners.get(ref.step_id or "")
            if owner is None:
                return False
            return owner.output_clean if type(owner) is LinkedStep else owner.clean(ref.step_id or "")

        return mapping_is_clean(self.output_mapping, source_clean, key_ok)

    async def execute(self, args: dict[str, Any], run: CallContext) -> Any:
        emit = run.run.emit
        call_id = run.tool_call_id
        total = self.total
        numbers = self._numbers
        # Progress payloads are built here from YAML names and counts (no sensitive key): clean=True
        # still hides a run's known secrets but skips the key walk.
        emit("tool_progress_delta", self._prepared, call_id, None, None, None, True)
        outputs: dict[str, Any] = {}
        output: Any = None
        for index, step in enumerate(self.steps):
            if type(step) is not LinkedStep:
                output = await step.run(args, outputs, run)
                continue
            step_started = perf_counter_ns()
            emit("tool_progress_delta", self._started[index], call_id, None, None, None, True)
            outputs[step.id] = output = await call_step(step, args, outputs, run)
            emit(
                "tool_progress_delta",
                {
                    "stage": "step_finished",
                    "message": self._finished[index],
                    "step": numbers[index],
                    "of": total,
                    "step_id": step.event_id,
                    "duration_ms": elapsed_ms(step_started),
                },
                call_id, None, None, None, True,
            )
        if self.resolve_output is not None:
            try:
                output = self.resolve_output(args, outputs)
            except MappingError as exc:
                raise StepFailure("execution_error", f"workflow output: {exc}") from None
            if output is MISSING:
                output = None
        emit("tool_progress_delta", self._done, call_id, None, None, None, True)
        return output


def _input_failure(step: LinkedStep, run: CallContext, value: Any, error: MappingError | None = None) -> StepFailure:
    """Why the step's mapped input cannot go to its skill (a mapping error, or the value
    breaks the skill's input schema), told as a `skill_error` event."""
    skill = step.skill
    if error is not None:
        failure = StepFailure("execution_error", f"step {step.id!r} input: {error}")
    else:
        violations = skill.input_schema.check(value)
        failure = StepFailure(
            "execution_error",
            f"step {step.id!r} gave skill {skill.name!r} an invalid input: "
            + "; ".join(f"{v.pointer or '/'}: {v.message}" for v in violations[:5]),
            {"step_id": step.id, "errors": [v.as_dict() for v in violations]},
        )
    data: dict[str, Any] = {"code": failure.code, "message": failure.message, "attempt": 1}
    run.run.emit("skill_error", data, run.tool_call_id, step.event_id, skill.name)
    return failure


async def call_step(step: LinkedStep, args: dict[str, Any], outputs: dict[str, Any], run: CallContext) -> Any:
    """One plain step: its input, its attempts (`LinkedStep.attempt`, `RetryPolicy`) and their
    events. The one copy, whoever runs the step (see the module's docstring).

    Inside a forEach, `run` is the item's (workflow_nodes.ItemRun): its events say `item_index`.
    """
    emit = run.run.emit
    call_id = run.tool_call_id
    skill = step.skill
    try:  # the mapped input, valid, with the skill's defaults filled in
        value = step.resolve_input(args, outputs)
    except MappingError as exc:
        raise _input_failure(step, run, None, exc) from None
    if value is MISSING:
        value = {}
    schema = skill.input_schema
    if not schema.is_valid(value):
        raise _input_failure(step, run, value)
    if schema.has_defaults:
        value = schema.with_defaults(value)
    attempt = 1
    while True:
        started = perf_counter_ns()
        emit("skill_start", {"input": value, "attempt": attempt, "kind": skill.kind},
             call_id, step.event_id, skill.name, None, skill.input_clean)
        ctx = SkillContext(run, step.event_id, skill.name, attempt) if skill.needs_context else None
        try:
            output = await step.attempt(value, ctx, skill.call)
        except Exception as exc:  # noqa: BLE001 - a skill's failure becomes an error event, not a crash
            error = step.failure(exc)
        else:
            duration_ms = elapsed_ms(started)
            emit("skill_result", {"output": output, "duration_ms": duration_ms},
                 call_id, step.event_id, skill.name, None, skill.output_clean)
            if duration_ms > skill.slow_after_ms:
                skill.took_long(duration_ms)
            return output
        duration_ms = elapsed_ms(started)
        if duration_ms > skill.slow_after_ms:
            skill.took_long(duration_ms)
        will_retry = step.retry.will_retry(error, attempt)
        emit("skill_error",
             {"code": error.code, "message": error.message, "attempt": attempt, "will_retry": will_retry,
              "duration_ms": duration_ms},
             call_id, step.event_id, skill.name)
        if not will_retry:
            raise error
        await step.retry.pause(attempt)
        attempt += 1


def _invalid_output(skill: Skill, violations: list[Violation]) -> StepFailure:
    return StepFailure(
        "execution_error",
        f"skill {skill.name!r} returned output that does not match its output schema: "
        + "; ".join(f"{v.pointer or '/'}: {v.message}" for v in violations[:5]),
        {"errors": [v.as_dict() for v in violations]},
    )

"""The workflow of one tool call: the local workflow executor, with each step's skill call an activity.

Deterministic (Temporal replays it): the workflow runs the very `WorkflowExecutor.execute`
and `call_step` of a local call (engine/executors/workflow.py) on the project the worker
linked (served.py, passed through the sandbox): the `$toolArgs`/`$steps` mapping, the step
input checks, the step's `retry` (attempts, doubling delay, `will_retry`) and every event
around a step and an attempt are the local ones. Only the skill call leaves it: each
attempt is one activity (`_ActivitySkill`), which runs the skill on a worker
(`LinkedStep.attempt`) and returns its outcome and the skill's own events. Temporal's own
retry policy only covers losing a worker (heartbeat timeout), which never spends a user's retries.

Events get their `seq` here, and only here: the workflow's Run numbers and redacts every
event (`Run.emit`, as locally; an activity returns its events unnumbered and unredacted),
and the workflow writes numbered batches, keyed by (run_id, seq): the events so far go with
the next step's activity, which writes them before its skill runs (one activity per step,
not two), and the last ones go with the execution's end (`protocol.ended`): the front door
writes them with the call's last event (a worker that adopted the run, if it died). A retried write changes nothing; a
step that ran twice (its worker died mid-step) reports only the events of the run that
completed, so the store holds each seq once.

A workflow with `when` / `forEach` / `parallel` / sub-workflow steps (docs/workflows.md) runs
as one activity: the local executor on the worker (as single.py runs a tool that is not a
workflow), so the constructs keep their exact local semantics, events and cancellation;
losing the worker runs the whole body again rather than one step.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from ...errors import StepFailure
    from ...executors.workflow import LinkedStep, WorkflowExecutor
    from ...runtime.context import CallContext, SkillContext
    from ...runtime.contracts import Skill
    from ...runtime.events import Event
    from ...runtime.run import Run
    from .agent_protocol import AGENT_WORKFLOW
    from .approvals import Confirmable
    from .protocol import (
        APPROVE_SIGNAL,
        BODY_ACTIVITY,
        RECORD_ACTIVITY,
        REVISION_MISMATCH,
        STEP_ACTIVITY,
        STEP_FAILURE,
        WORKFLOW,
        ended,
        failure_details,
    )
    from .served import Served, check_revision, served

GRACE_S = 5.0  # start-to-close beyond a step's own timeout (the step enforces that itself, with a clear event)
INFRASTRUCTURE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                                   maximum_interval=timedelta(seconds=10), non_retryable_error_types=[REVISION_MISMATCH])
RECORD_TIMEOUT = timedelta(seconds=30)


class WorkflowEvents:
    """The events of one execution: numbered and redacted by its Run (the Run's listener is
    `collect`), held as rows until they are written, with the next activity (`take`) or by
    the record activity (`record`)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.rows: list[list[Any]] = []
        self._ts: int | None = None  # the time of the event being relayed (when the worker emitted it)
        self._measured: dict[str, Any] | None = None  # (see `measured`)

    @classmethod
    def of_call(cls, call: dict[str, Any], here: Served) -> tuple["WorkflowEvents", Run]:
        """A tool call's events and the Run that numbers them after the front door's (`first_seq`),
        its redaction first taught the call's arguments (as the front door's Run learned them
        from `tool_call_start`)."""
        events = cls(call["run_id"])
        scrub = here.project.redactor.for_run()
        scrub(call["arguments"])
        run = Run(call["run_id"], [events.collect], scrub, records=False)
        run.watchers = 1  # its events go to the store front doors follow as they come: an agent step's model streams
        run.number_after(call["first_seq"] - 1)
        return events, run

    def collect(self, event: Event) -> None:
        data = event.data
        measured = self._measured
        if measured is not None and event.type in ("skill_result", "skill_error"):
            data, self._measured = {**data, **measured}, None
        ts = self._ts if self._ts is not None else event.ts
        self.rows.append([event.seq, event.type, ts, event.tool_call_id, event.step_id, event.skill, data])

    def relay(self, run: Run, tool_call_id: str, reported: list[list[Any]]) -> None:
        """Emit, through `run`, the events an activity reported (`[type, ts, step_id, skill, data]`),
        each keeping the time the worker emitted it."""
        try:
            for kind, ts, step_id, skill, data in reported:
                self._ts = ts
                run.emit(kind, data, tool_call_id, step_id, skill)
        finally:
            self._ts = None

    def measured(self, outcome: dict[str, Any]) -> None:
        """The attempt's end event (emitted next, by `call_step`) carries the worker's measure of
        the skill call rather than the workflow's of the activity, and `activity_attempt` when
        the worker that first ran it was lost."""
        measure = {"duration_ms": outcome["duration_ms"]}
        if outcome.get("activity_attempt", 1) > 1:
            measure["activity_attempt"] = outcome["activity_attempt"]
        self._measured = measure

    def take(self) -> list[list[Any]]:
        rows, self.rows = self.rows, []
        return rows

    async def record(self) -> None:
        """Write the numbered events so far (one activity; a retry of it changes nothing)."""
        if self.rows:
            await workflow.execute_activity(
                RECORD_ACTIVITY, {"run_id": self.run_id, "events": self.take()},
                start_to_close_timeout=RECORD_TIMEOUT, retry_policy=INFRASTRUCTURE_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,  # no write lands after the end
            )

    def fail(self, failure: StepFailure, run: Run) -> Any:
        """End the execution with the call's failure (its code, details, last seq and last events
        in the error's details)."""
        raise ApplicationError(failure.message, failure_details(failure.code, failure.details, run.last_seq, self.take()),
                               type=STEP_FAILURE, non_retryable=True)


async def run_body(call: dict[str, Any], events: WorkflowEvents, run: Run, summary: str) -> Any:
    """The tool's executor as one activity on a worker (BODY_ACTIVITY, single.py); its events
    emitted through `run`. The output, or the call's StepFailure."""
    outcome = await workflow.execute_activity(
        BODY_ACTIVITY, call, start_to_close_timeout=timedelta(seconds=call["tool_timeout"] + GRACE_S),
        heartbeat_timeout=timedelta(seconds=served().config.heartbeat_timeout), retry_policy=INFRASTRUCTURE_RETRY,
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED, summary=summary,
    )
    events.relay(run, call["tool_call_id"], outcome["events"])
    if not outcome["ok"]:
        raise StepFailure(outcome["code"], outcome["message"], outcome["details"] or {})
    return outcome["output"]


class _NotTheStep(BaseException):
    """An activity failed as infrastructure (another revision, a timeout): not a failed attempt
    for the step's `retry` (a BaseException, so `call_step` lets it through), but the execution's."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


@workflow.defn(name=WORKFLOW)
class ToolWorkflow(Confirmable):
    """One tool call (workflow id = the run id)."""

    def __init__(self) -> None:
        super().__init__()
        self._call: dict[str, Any] = {}
        self._events = WorkflowEvents("")
        self._run: Run | None = None
        self._child: Any = None  # the running agent step's workflow (approvals go on to it)

    @workflow.signal(name=APPROVE_SIGNAL)
    async def approve(self, tool_call_id: str, approve: bool) -> None:  # type: ignore[override]  # async: it signals the child
        """An answer from any front door: this call's own, or one an agent step's tool call waits for."""
        super().approve(tool_call_id, approve)
        child = self._child
        if child is not None:
            await child.signal(APPROVE_SIGNAL, args=[tool_call_id, approve])

    @workflow.run
    async def run(self, call: dict[str, Any]) -> dict[str, Any]:
        """`call`: revision, run_id, tool_call_id, tool, arguments, model, first_seq, tool_timeout,
        and for a `confirm: true` tool `confirm` and `approval_timeout`. Returns {"output", "last_seq",
        "rows"} (protocol.ended); a failure is an ApplicationError (STEP_FAILURE)."""
        self._call = call
        here = check_revision(call["revision"])
        events, run = WorkflowEvents.of_call(call, here)
        self._events, self._run = events, run
        executor = here.project.tools[call["tool"]].executor
        assert isinstance(executor, WorkflowExecutor)  # RemoteTool starts this workflow for workflow tools only
        try:
            if call.get("confirm"):
                await self.confirm_call(call, run, events.record)
            if executor.has_constructs:
                output = await run_body(call, events, run, f"workflow of {call['tool']}")
            else:
                context = CallContext(call["run_id"], call["tool_call_id"], call["tool"], run, here.project, call.get("model"))
                output = await self._on_workers(executor).execute(call["arguments"], context)
        except StepFailure as failure:
            events.fail(failure, run)
        except _NotTheStep as infrastructure:
            raise infrastructure.error  # noqa: B904 - as it came: `from` would replace its own cause
        return ended({"output": output, "last_seq": run.last_seq}, events.take())

    def _on_workers(self, executor: WorkflowExecutor) -> WorkflowExecutor:
        """The executor whose steps' skills are activities (their timeouts enforced on the worker,
        their waits between attempts `_pause`)."""
        steps = [dataclasses.replace(step, skill=_ActivitySkill(self, index, step), timeout=None,
                                     retry=dataclasses.replace(step.retry, wait=self._pause))
                 for index, step in enumerate(executor.steps)]
        return WorkflowExecutor(executor.name, steps, executor.resolve_output, executor.output_mapping)

    async def attempt(self, index: int, step: LinkedStep, value: Any, attempt: int) -> Any:
        """One attempt of step `index` as an activity: its output, or its StepFailure (the skill's
        own events emitted first, as they were emitted during the call locally)."""
        call = self._call
        if step.skill.kind == "agent":
            return await self._agent_step(index, step, value, attempt)
        limit = step.timeout if step.timeout is not None else call["tool_timeout"]
        try:
            outcome = await workflow.execute_activity(
                STEP_ACTIVITY,
                {"revision": call["revision"], "run_id": call["run_id"], "tool_call_id": call["tool_call_id"],
                 "tool": call["tool"], "step": index, "input": value, "model": call.get("model"), "attempt": attempt,
                 "record": self._events.take(), "trace": call.get("trace")},
                start_to_close_timeout=timedelta(seconds=limit + GRACE_S),
                heartbeat_timeout=timedelta(seconds=served().config.heartbeat_timeout),
                retry_policy=INFRASTRUCTURE_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"step {step.id}, attempt {attempt}",
            )
        except Exception as exc:  # noqa: BLE001 - not the skill's failure: the execution's (see _NotTheStep)
            raise _NotTheStep(exc) from None
        events = self._events
        assert self._run is not None
        events.relay(self._run, call["tool_call_id"], outcome["events"])
        events.measured(outcome)
        if outcome["ok"]:
            return outcome["output"]
        raise StepFailure(outcome["code"], outcome["message"], outcome["details"] or {}, retryable=outcome["retryable"])

    async def _agent_step(self, index: int, step: LinkedStep, value: Any, attempt: int) -> Any:
        """One attempt of an agent step as a child workflow (agent_workflow.py): each model request
        an activity (a worker's crash never sends a completed one again), its events the outer
        run's, numbered after this run's and returned with its outcome (the rows it did not write)."""
        call, run = self._call, self._run
        assert run is not None
        task = {key: call.get(key) for key in ("revision", "run_id", "tool_call_id", "tool", "arguments", "model",
                                               "approval_timeout", "trace")}
        try:
            self._child = await workflow.start_child_workflow(
                AGENT_WORKFLOW, {**task, "step": index, "input": value, "first_seq": run.last_seq + 1,
                                 "record": self._events.take()},
                id=f"{call['run_id']}:{step.event_id}:{attempt}", static_summary=f"agent step {step.id}, attempt {attempt}")
            outcome = await self._child
        except Exception as exc:  # noqa: BLE001 - not the skill's failure: the execution's (see _NotTheStep)
            raise _NotTheStep(exc) from None
        finally:
            self._child = None
        run.number_after(outcome["last_seq"])
        self._events.rows.extend(outcome["rows"])
        if outcome["ok"]:
            return outcome["output"]
        raise StepFailure(outcome["code"], outcome["message"], outcome["details"] or {}, retryable=outcome["retryable"])

    async def _pause(self, seconds: float) -> None:
        """Between two attempts: the events so far reach the store, then a durable timer."""
        await self._events.record()
        await workflow.sleep(seconds)


class _ActivitySkill(Skill):
    """A step's skill as the workflow sees it: each call is one attempt on a worker
    (`ToolWorkflow.attempt`), which checks the output against the skill's schema itself."""

    def __init__(self, flow: ToolWorkflow, index: int, step: LinkedStep) -> None:  # not super().__init__: the
        skill = step.skill                                                        # linked skill's schemas, compiled
        self.name, self.kind = skill.name, skill.kind
        self.input_schema_raw, self.output_schema_raw = skill.input_schema_raw, skill.output_schema_raw
        self.input_schema, self.output_schema = skill.input_schema, None
        self.input_clean, self.output_clean = skill.input_clean, skill.output_clean
        self.needs_context = True  # for the attempt's number
        self.call = self.run  # type: ignore[assignment]  # needs_context: never None here
        self.flow, self.index, self.step = flow, index, step

    async def run(self, input: dict[str, Any], ctx: SkillContext) -> Any:
        return await self.flow.attempt(self.index, self.step, input, ctx.attempt)

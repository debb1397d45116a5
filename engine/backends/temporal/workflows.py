"""The workflow of one tool call: the steps of the tool's workflow, in order, as activities.

Deterministic (Temporal replays it): the `$toolArgs`/`$steps` mapping and the step input
checks run here on the project the worker linked (served.py, passed through the sandbox);
every I/O is an activity. Events get their `seq` here, and only here: an activity returns
its events unnumbered with its result, and the workflow writes numbered batches, keyed by
(run_id, seq): the events so far go with the next step's activity, which writes them before
its skill runs (one activity per step, not two), and the last ones through the record
activity. A retried write changes nothing; a step that ran twice (its worker died mid-step)
reports only the events of the run that completed, so the store holds each seq once.

A skill's failure comes back as a value, and the step's `retry` is applied here with the
local executor's semantics (attempts, doubling delay, `will_retry`); Temporal's own retry
policy only covers losing a worker (heartbeat timeout), which never spends a user's retries.

A workflow with `when` / `forEach` / `parallel` / sub-workflow steps (docs/workflows.md) runs
as one activity: the local executor on the worker (as single.py runs a tool that is not a
workflow), so the constructs keep their exact local semantics, events and cancellation;
losing the worker runs the whole body again rather than one step.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from ...lang.mapping import MISSING, MappingError
    from .protocol import (BODY_ACTIVITY, RECORD_ACTIVITY, REVISION_MISMATCH, STEP_ACTIVITY, STEP_FAILURE, WORKFLOW,
                           failure_details, mismatch_message)
    from .served import served

GRACE_S = 5.0  # start-to-close beyond a step's own timeout (the step enforces that itself, with a clear event)
INFRASTRUCTURE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                                   maximum_interval=timedelta(seconds=10), non_retryable_error_types=[REVISION_MISMATCH])
RECORD_TIMEOUT = timedelta(seconds=30)


@workflow.defn(name=WORKFLOW)
class ToolWorkflow:
    """One tool call (workflow id = the run id)."""

    def __init__(self) -> None:
        self._call: dict[str, Any] = {}
        self._seq = 0
        self._pending: list[list[Any]] = []

    @workflow.run
    async def run(self, call: dict[str, Any]) -> dict[str, Any]:
        """`call`: revision, run_id, tool_call_id, tool, arguments, model, first_seq, tool_timeout.
        Returns {"output", "last_seq"}; a failure is an ApplicationError (STEP_FAILURE)."""
        self._call = call
        self._seq = call["first_seq"] - 1
        here = served()
        if call["revision"] != here.revision:
            raise ApplicationError(mismatch_message(call["revision"], here.revision), type=REVISION_MISMATCH,
                                   non_retryable=True)
        executor = here.project.tools[call["tool"]].executor
        if getattr(executor, "has_constructs", False):
            return await self._whole_body(call)
        args = call["arguments"]
        self._add("tool_progress_delta", executor._prepared)
        outputs: dict[str, Any] = {}
        for index, step in enumerate(executor.steps):
            started = workflow.now()
            self._add("tool_progress_delta", executor._started[index])
            value = await self._step_input(step, args, outputs)
            outputs[step.id] = await self._run_step(index, step, value)
            self._add("tool_progress_delta", {
                "stage": "step_finished", "message": executor._finished[index], "step": index + 1,
                "of": len(executor.steps), "step_id": step.id, "duration_ms": _ms_since(started)})
        output = outputs[executor.steps[-1].id] if executor.steps else None
        if executor.resolve_output is not None:
            try:
                output = executor.resolve_output(args, outputs)
            except MappingError as exc:
                await self._fail("execution_error", f"workflow output: {exc}")
            if output is MISSING:
                output = None
        self._add("tool_progress_delta", executor._done)
        await self._record()
        return {"output": output, "last_seq": self._seq}

    async def _whole_body(self, call: dict[str, Any]) -> dict[str, Any]:
        """The local executor as one activity (BODY_ACTIVITY, single.py); its events numbered here."""
        outcome = await workflow.execute_activity(
            BODY_ACTIVITY, call, start_to_close_timeout=timedelta(seconds=call["tool_timeout"] + GRACE_S),
            heartbeat_timeout=timedelta(seconds=served().config.heartbeat_timeout), retry_policy=INFRASTRUCTURE_RETRY,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED, summary=f"workflow of {call['tool']}",
        )
        for kind, ts, step_id, skill, data in outcome["events"]:
            self._add(kind, data, step_id, skill, ts)
        if not outcome["ok"]:
            await self._fail(outcome["code"], outcome["message"], outcome["details"])
        await self._record()
        return {"output": outcome["output"], "last_seq": self._seq}

    async def _run_step(self, index: int, step: Any, value: Any) -> Any:
        """Attempts of one step (its `retry`), each one activity; the step's output."""
        skill = step.skill
        attempt, delay = 1, step.retry_delay
        limit = step.timeout if step.timeout is not None else self._call["tool_timeout"]
        while True:
            self._add("skill_start", {"input": value, "attempt": attempt, "kind": skill.kind}, step.id, skill.name)
            batch, self._pending = self._pending, []  # written by the step's activity before the skill runs
            outcome = await workflow.execute_activity(
                STEP_ACTIVITY,
                {"revision": self._call["revision"], "run_id": self._call["run_id"],
                 "tool_call_id": self._call["tool_call_id"], "tool": self._call["tool"], "step": index,
                 "input": value, "model": self._call.get("model"), "attempt": attempt,
                 "record": batch, "arguments": self._call["arguments"]},
                start_to_close_timeout=timedelta(seconds=limit + GRACE_S),
                heartbeat_timeout=timedelta(seconds=served().config.heartbeat_timeout),
                retry_policy=INFRASTRUCTURE_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"step {step.id}, attempt {attempt}",
            )
            for kind, ts, step_id, skill_name, data in outcome["events"]:
                self._add(kind, data, step_id, skill_name, ts)
            if outcome["ok"]:
                result = {"output": outcome["output"], "duration_ms": outcome["duration_ms"]}
                if outcome["activity_attempt"] > 1:  # its worker was lost: this is the run that completed
                    result["activity_attempt"] = outcome["activity_attempt"]
                self._add("skill_result", result, step.id, skill.name)
                return outcome["output"]
            will_retry = attempt <= step.retries and outcome["retryable"]
            self._add("skill_error", {"code": outcome["code"], "message": outcome["message"], "attempt": attempt,
                                      "will_retry": will_retry, "duration_ms": outcome["duration_ms"]},
                      step.id, skill.name)
            if not will_retry:
                await self._fail(outcome["code"], outcome["message"], outcome["details"])
            await self._record()
            await workflow.sleep(delay)
            delay *= 2
            attempt += 1

    async def _step_input(self, step: Any, args: dict[str, Any], outputs: dict[str, Any]) -> Any:
        """The step's mapped input, validated, with the skill's defaults (as engine/executors/workflow.py)."""
        skill = step.skill
        details = None
        try:
            value = step.resolve_input(args, outputs)
        except MappingError as exc:
            message = f"step {step.id!r} input: {exc}"
        else:
            if value is MISSING:
                value = {}
            if skill.input_schema.is_valid(value):
                return skill.input_schema.with_defaults(value) if skill.input_schema.has_defaults else value
            violations = skill.input_schema.check(value)
            message = (f"step {step.id!r} gave skill {skill.name!r} an invalid input: "
                       + "; ".join(f"{v.pointer or '/'}: {v.message}" for v in violations[:5]))
            details = {"step_id": step.id, "errors": [v.as_dict() for v in violations]}
        self._add("skill_error", {"code": "execution_error", "message": message, "attempt": 1}, step.id, skill.name)
        await self._fail("execution_error", message, details)

    def _add(self, kind: str, data: Any, step_id: str | None = None, skill: str | None = None,
             ts: int | None = None) -> None:
        self._seq += 1
        when = ts if ts is not None else int(workflow.now().timestamp() * 1000)
        self._pending.append([self._seq, kind, when, self._call["tool_call_id"], step_id, skill, data])

    async def _record(self) -> None:
        """Write the numbered events so far (one activity; a retry of it changes nothing)."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        await workflow.execute_activity(
            RECORD_ACTIVITY, {"run_id": self._call["run_id"], "arguments": self._call["arguments"], "events": batch},
            start_to_close_timeout=RECORD_TIMEOUT, retry_policy=INFRASTRUCTURE_RETRY,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,  # no write lands after the end
        )

    async def _fail(self, code: str, message: str, details: dict[str, Any] | None = None) -> Any:
        await self._record()
        raise ApplicationError(message, failure_details(code, details, self._seq), type=STEP_FAILURE, non_retryable=True)


def _ms_since(started: Any) -> int:
    return int((workflow.now() - started).total_seconds() * 1000)

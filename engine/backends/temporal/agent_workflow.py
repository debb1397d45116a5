"""The agent loop as a Temporal workflow: the local loop (engine/runtime/agent.py), made durable.

The workflow runs the very `_Loop` of the local agent, deterministically, on the project the
worker linked; only its two kinds of I/O leave it, each as an activity:

- a model request (`MODEL_ACTIVITY`): its answer is recorded in the execution's history, so
  after a worker crash the loop replays with it and the request is never sent again;
- a tool call (`TOOL_ACTIVITY`): routed on a worker as locally. A `confirm: true` tool
  waits here for the `approve` signal keyed by its tool_call_id, on a durable timer (the
  approval timeout), so a pending approval outlives every worker and every front door.

The loop's state (messages, steps, usage, repeated and corrected calls) is rebuilt by
replay, and its total timeout is a Temporal timer, so every limit holds across restarts.
Events are numbered by the workflow's Run (gap-free `seq`, as locally) and written in
batches keyed by (run_id, seq): the batch so far goes with the next activity, which writes
it before its work; a replay rewrites nothing.
"""

from __future__ import annotations

import asyncio
import copy
from datetime import timedelta
from typing import Any, Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from ...errors import StepFailure
    from ...providers.base import ModelRequest, ModelResponse, ProviderError
    from ...runtime.agent import Agent, AgentLimits, _Loop, as_messages
    from ...runtime.answers import DEFAULT_REPAIRS
    from ...runtime.result import ToolResult
    from ...runtime.run import Run
    from ...skills.agent import StepEvents
    from .agent_protocol import (
        AGENT_WORKFLOW,
        MODEL_ACTIVITY,
        TOOL_ACTIVITY,
        message_in,
        message_out,
        request_out,
        response_in,
        result_in,
        result_out,
        usage_out,
    )
    from .approvals import DEFAULT_APPROVAL_TIMEOUT_S, Confirmable
    from .served import Served, check_revision, served
    from .workflows import GRACE_S, INFRASTRUCTURE_RETRY, WorkflowEvents

MODEL_TIMEOUT_S = 600.0  # start-to-close of one model request when the run has no total timeout


@workflow.defn(name=AGENT_WORKFLOW)
class AgentWorkflow(Confirmable):
    """One agent run (workflow id = the run id)."""

    def __init__(self) -> None:
        super().__init__()
        self._call: dict[str, Any] = {}
        self._events = WorkflowEvents("")  # numbered events not yet written
        self._run: Any = None  # the Run events go through (an agent step's: its StepEvents)
        self._total: float | None = None  # the loop's total timeout

    @workflow.run
    async def run(self, call: dict[str, Any]) -> dict[str, Any]:
        """`call`: revision, run_id, model, tools, limits, tool_choice, system, messages, principal,
        approval_timeout, output_schema, repairs. Returns the AgentResult's fields (tool results as plain JSON) and last_seq.
        With `step`, an agent step of a tool's workflow instead (`_step`)."""
        self._call = call
        here = check_revision(call["revision"])
        project = self._project(here.project)
        if "step" in call:
            return await self._step(call, here, project)
        self._events = WorkflowEvents(call["run_id"])
        self._run = run = Run(call["run_id"], [self._events.collect], project.redactor.for_run(), kind="agent",
                              name=call["model"], principal=call.get("principal"))
        run.watchers = 1  # its events go to the store front doors follow as they come: the model's answer streams
        agent = Agent(None, call["model"], tools=call.get("tools"), limits=AgentLimits(**call["limits"]),
                      tool_choice=call.get("tool_choice", "auto"), system=call.get("system"),
                      output_schema=call.get("output_schema"), repairs=call.get("repairs", DEFAULT_REPAIRS))
        result = await self._loop(agent, run, [message_in(m) for m in call["messages"]], project)
        await self._events.record()
        return {"stop_reason": result.stop_reason, "answer": result.answer, "steps": result.steps,
                "usage": usage_out(result.usage), "error": result.error,
                "tool_results": [result_out(r) for r in result.tool_results],
                "messages": [message_out(m) for m in result.messages], "last_seq": run.last_seq,
                "data": result.data, "error_details": result.error_details}

    async def _loop(self, agent: Agent, events: Any, messages: list[Any], project: Any) -> Any:
        """The durable loop to its stop (its AgentResult), on `project` (this worker's, at the call's revision)."""
        self._total = agent.limits.total_timeout
        loop = _DurableLoop(agent, events, messages, project)
        loop.flow = self
        try:
            return await loop.run()
        except asyncio.CancelledError:
            await self._events.record()  # agent_done (cancelled) reaches the store before the execution ends
            raise

    async def _step(self, call: dict[str, Any], here: Served, project: Any) -> dict[str, Any]:
        """An agent step (engine/skills/agent.py), a child of its tool's workflow (workflows.py):
        `call` adds tool, step (its index), input, arguments, first_seq and record to a tool
        call's keys. Its events are the outer run's: numbered from `first_seq`, carrying the
        step's step_id and skill, the outer events not yet written (`record`) going first. Returns
        the step's outcome as a step activity does ({"ok", "output"} or the failure's code,
        message, details, retryable), its usage, last_seq and the rows not yet written."""
        step = project.tools[call["tool"]].executor.steps[call["step"]]
        skill = step.skill
        self._events, run = WorkflowEvents.of_call(call, here)
        self._events.rows.extend(call["record"])
        self._run = StepEvents(run, step.event_id, skill.name)
        agent, user = skill.agent(call["input"], call.get("model") or skill.model or project.default_model)
        result = await self._loop(agent, self._run, as_messages(user), project)
        outcome: dict[str, Any] = {"usage": usage_out(result.usage), "last_seq": run.last_seq, "rows": self._events.take()}
        try:
            return {**outcome, "ok": True, "output": skill.output(result)}
        except StepFailure as failure:
            return {**outcome, "ok": False, "code": failure.code, "message": failure.message, "details": failure.details,
                    "retryable": failure.retryable}

    def _project(self, linked: Any) -> Any:
        """The linked project whose models answer through the model activity."""
        twin = copy.copy(linked)

        def provider(name: str) -> tuple[Any, Any]:
            spec = linked.models.get(name)
            if spec is None:
                return linked.provider(name)  # raises the local error
            return _ActivityProvider(self, name), spec

        twin.provider = provider
        return twin

    # ─── the two kinds of I/O ────────────────────────────────────────────────────

    async def model_request(self, model: str, request: ModelRequest, on_text: Callable[[str], None] | None) -> ModelResponse:
        total = self._total
        outcome = await _cancellable(workflow.execute_activity(
            MODEL_ACTIVITY,
            {"revision": self._call["revision"], "run_id": self._call["run_id"], "model": model,
             "request": request_out(request), "record": self._events.take()},
            start_to_close_timeout=timedelta(seconds=(total or MODEL_TIMEOUT_S) + GRACE_S),
            heartbeat_timeout=timedelta(seconds=served().config.heartbeat_timeout),
            retry_policy=INFRASTRUCTURE_RETRY, cancellation_type=ActivityCancellationType.TRY_CANCEL,
            summary=f"model {model}"))
        if on_text is not None:
            for piece in outcome["pieces"]:
                on_text(piece)
        if not outcome["ok"]:
            kind = outcome["kind"]
            raise ProviderError(outcome["message"] if kind == "provider" else f"{kind}: {outcome['message']}")
        return response_in(outcome["response"])

    async def tool_call(self, name: str, arguments: Any, tool_call_id: str, allowed: Any,
                        timeout: float | None) -> ToolResult:
        assert self._run is not None
        tool = served().project.tools.get(name)
        # The router enforces the limit on the worker (a `timeout` result); Temporal's start-to-close is a backstop.
        limit = min((t for t in (timeout, tool.timeout if tool is not None else None) if t is not None), default=60.0)
        decision: bool | None = None
        seen = 0
        while True:
            outcome = await _cancellable(workflow.execute_activity(
                TOOL_ACTIVITY,
                {"revision": self._call["revision"], "run_id": self._call["run_id"], "tool": name,
                 "arguments": arguments, "tool_call_id": tool_call_id, "timeout": timeout, "decision": decision,
                 "allowed_tools": sorted(allowed) if allowed is not None else None, "record": self._events.take()},
                start_to_close_timeout=timedelta(seconds=limit + GRACE_S),
                heartbeat_timeout=timedelta(seconds=served().config.heartbeat_timeout),
                retry_policy=INFRASTRUCTURE_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"tool {name} ({tool_call_id})"))
            for kind, call_id, step_id, skill, data in outcome["events"][seen:]:
                self._run.emit(kind, data, call_id, step_id, skill)
            if outcome.get("cancelled"):
                raise asyncio.CancelledError()
            if not outcome.get("awaiting"):
                return result_in(outcome["result"])
            seen = len(outcome["events"])
            decision = await self._answer(tool_call_id)

    async def _answer(self, tool_call_id: str) -> bool:
        """Wait for the approve signal of this call (denied when the approval timeout passes)."""
        self._waiting.add(tool_call_id)
        await self._events.record()  # confirmation_required reaches the store: front doors see the question
        return await self.wait_for_answer(tool_call_id, self._call.get("approval_timeout") or DEFAULT_APPROVAL_TIMEOUT_S)


async def _cancellable(activity: Any) -> Any:
    """The activity's result; its cancellation as asyncio's, which the loop handles as locally."""
    try:
        return await activity
    except ActivityError as exc:
        if isinstance(exc.cause, CancelledError):
            raise asyncio.CancelledError() from None
        raise


class _ActivityProvider:
    """A model whose requests are the workflow's model activity."""

    def __init__(self, flow: AgentWorkflow, name: str) -> None:
        self.flow = flow
        self.name = name

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        return await self.flow.model_request(self.name, request, on_text)


class _DurableLoop(_Loop):
    """The local loop with its tool calls routed on workers."""

    flow: AgentWorkflow

    def route(self, events: Any, project: Any, name: str, arguments: Any, *, tool_call_id: str,  # type: ignore[override]  # routed by the workflow, not the router
              allowed_tools: Any = None, timeout: float | None = None) -> Any:
        return self.flow.tool_call(name, arguments, tool_call_id, allowed_tools, timeout)

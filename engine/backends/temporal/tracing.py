"""A worker's spans: one per activity that runs a call's body or a step's skill, in the caller's trace.

The front door puts the W3C context of the call's `execute_tool` span in the execution's input
(`call["trace"]`, engine/telemetry/traces.py `carrier`); the workflow hands it to each step's
activity (`task["trace"]`). Here, an activity inbound interceptor opens `activity <type>` as
that span's child, current while the activity runs — so what the skill does inside (an
instrumented HTTP client, an embedder's spans) lands in the caller's trace too. The
workflow itself makes no spans: Temporal replays it, and its events already make the front
door's step/skill/chat spans (the front door relays them).

The tracer is the worker process's global provider (`skillyard worker` sets it when traces
are on: `open_process_traces`); without one, no interceptor is installed: nothing per activity.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from ...telemetry.traces import global_provider
from .protocol import BODY_ACTIVITY, STEP_ACTIVITY

TRACED = (STEP_ACTIVITY, BODY_ACTIVITY)  # the record activity is bookkeeping: no span


def activity_tracing() -> list[Interceptor]:
    """The worker's interceptors: the tracing one when this process has a tracer provider."""
    provider = global_provider()
    return [] if provider is None else [ActivityTracing(provider.get_tracer("skillyard.worker"))]


class ActivityTracing(Interceptor):
    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _TracedActivity(next, self.tracer)


class _TracedActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, tracer: Any) -> None:
        super().__init__(next)
        self.tracer = tracer

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        task = input.args[0] if input.args else None
        if info.activity_type not in TRACED or not isinstance(task, dict):
            return await super().execute_activity(input)
        from ...telemetry.otel import continued_span, fail_span

        attributes = {"skillyard.run_id": str(task.get("run_id")), "gen_ai.tool.name": str(task.get("tool")),
                      "gen_ai.tool.call.id": str(task.get("tool_call_id")), "temporal.activity.type": info.activity_type,
                      "temporal.activity.attempt": info.attempt, "temporal.workflow.id": info.workflow_id}
        if "step" in task:
            attributes["skillyard.step"] = int(task["step"]) + 1  # 1-based, as on the front door's step span
            attributes["skillyard.attempt"] = int(task.get("attempt") or 1)
        with continued_span(self.tracer, f"activity {info.activity_type}", task.get("trace"), attributes) as span:
            outcome = await super().execute_activity(input)
            if isinstance(outcome, dict) and outcome.get("ok") is False:
                fail_span(span, str(outcome.get("code") or "execution_error"))
            return outcome

"""A tool that is not a workflow (fetch, python, a third-party type) as one activity in a
one-activity workflow: the call's body runs on a worker, as a workflow tool's steps do.

The front door runs the router's checks as for any tool and starts `CALL_WORKFLOW` (workflow
id = the run id). The workflow runs `BODY_ACTIVITY` once: the tool's executor, on the
project the worker linked, with the call's context; the events it emits (fetch's progress,
a python tool's `tool_progress`) come back unnumbered and the workflow's Run numbers and
redacts them, and they go with the execution's end, as workflows.py's last ones do. A failure is
the call's (StepFailure's code, or execution_error), never retried by Temporal: only losing the worker (heartbeat) runs the
body again, so a call with side effects runs twice only when its worker died mid-call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from ...errors import StepFailure
    from .approvals import Confirmable
    from .protocol import BODY_ACTIVITY, CALL_WORKFLOW, ended
    from .served import check_revision
    from .workflows import WorkflowEvents, run_body


@workflow.defn(name=CALL_WORKFLOW)
class OneActivityWorkflow(Confirmable):
    """One call of a tool that is not a workflow (workflow id = the run id)."""

    @workflow.run
    async def run(self, call: dict[str, Any]) -> dict[str, Any]:
        """`call`: as workflows.ToolWorkflow's. Returns {"output", "last_seq", "rows"}; a failure is an
        ApplicationError (STEP_FAILURE) whose details hold the code, the last seq and the last rows."""
        events, run = WorkflowEvents.of_call(call, check_revision(call["revision"]))
        try:
            if call.get("confirm"):
                await self.confirm_call(call, run, events.record)
            output = await run_body(call, events, run, f"tool {call['tool']}")
        except StepFailure as failure:
            events.fail(failure, run)
        return ended({"output": output, "last_seq": run.last_seq}, events.take())


@activity.defn(name=BODY_ACTIVITY)
async def run_tool(call: dict[str, Any]) -> dict[str, Any]:
    """The tool's executor on this worker: {"ok", "output" | "code", "message", "details", "events"}."""
    from ...logging import logger
    from ...runtime.context import CallContext
    from ...runtime.run import Run
    from .activities import heartbeat

    here = check_revision(call["revision"])
    tool = here.project.tools.get(call["tool"])
    if tool is None:  # the revisions match, so only a tool made outside the files (admin API) can be missing
        return {"ok": False, "code": "execution_error", "details": None, "events": [],
                "message": f"tool {call['tool']!r} is not in the project files this worker serves"}
    events: list[list[Any]] = []
    run = Run(call["run_id"], [lambda e: events.append([e.type, e.ts, e.step_id, e.skill, e.data])])
    context = CallContext(call["run_id"], call["tool_call_id"], call["tool"], run, here.project, call.get("model"))
    beating = asyncio.get_running_loop().create_task(heartbeat(here.config.heartbeat_timeout / 3))
    try:
        output = await tool.executor.execute(call["arguments"], context)
    except StepFailure as failure:
        return {"ok": False, "code": failure.code, "message": failure.message, "details": failure.details,
                "events": events}
    except Exception as exc:  # noqa: BLE001 - as the router: the call fails, the worker goes on
        logger.exception("tool execution failed", tool=call["tool"], run_id=call["run_id"])
        return {"ok": False, "code": "execution_error", "message": f"{type(exc).__name__}: {exc}", "details": None,
                "events": events}
    finally:
        beating.cancel()
    return {"ok": True, "output": output, "events": events}

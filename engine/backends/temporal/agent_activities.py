"""The activities of an agent run: one model request, one tool call routed on the worker.

A model request's answer is returned to the workflow, which records it in the execution's
history: after a worker crash the workflow replays with that answer, so a request that
completed is never sent (nor paid for) again. Text pieces come back with the answer and the
workflow emits them as the local loop does.

A tool call runs through the router here, as locally (every check, the executor, its
timeout), on a Run that collects its events unnumbered for the workflow to number. A
`confirm: true` tool is asked in two runs of the router: the first stops where the router
asks for approval (`_AwaitApproval`) and reports the events up to there; the workflow then
waits for the answer (a signal, durable for hours) and runs the call again with the answer,
dropping the events it already has (the router's events before a confirmation depend only
on the call, so they are the same both times).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from temporalio import activity

from ...errors import StepFailure
from ...providers.base import ProviderError, clean_response
from ...runtime.router import route_in_run
from ...runtime.run import Run
from ...safety.untrusted import replace_lone_surrogates
from .activities import heartbeat
from .agent_protocol import MODEL_ACTIVITY, TOOL_ACTIVITY, request_in, response_out, result_out
from .served import check_revision

if TYPE_CHECKING:
    from .activities import Activities


class _AwaitApproval(BaseException):
    """Raised by the first run's approver: the router stops where it asks (a BaseException,
    so that the router's own `except Exception` does not turn it into a failed call)."""


class AgentActivities:
    """The agent activities of one worker; events are written through the tool activities' writer."""

    def __init__(self, activities: "Activities") -> None:
        self.activities = activities

    def all(self) -> list[Any]:
        return [self.model_request, self.agent_tool]

    @activity.defn(name=MODEL_ACTIVITY)
    async def model_request(self, task: dict[str, Any]) -> dict[str, Any]:
        """{"ok": True, "response", "pieces"} or {"ok": False, "message", "kind"} (the loop decides)."""
        here = check_revision(task["revision"])
        await self._record(task)
        pieces: list[str] = []
        beating = asyncio.get_running_loop().create_task(heartbeat(here.config.heartbeat_timeout / 3))
        try:
            # Created off the loop: a provider's first use imports its SDK, which must not starve the heartbeats.
            provider, _ = await asyncio.to_thread(here.project.provider, task["model"])
            response = await provider.request(request_in(task["request"]), lambda piece: pieces.append(replace_lone_surrogates(piece)))
        except ProviderError as exc:
            return {"ok": False, "kind": "provider", "message": str(exc), "pieces": pieces}
        except StepFailure as failure:  # the model cannot be used on this worker (a key not set in its environment)
            return {"ok": False, "kind": "provider", "message": failure.message, "pieces": pieces}
        except Exception as exc:  # noqa: BLE001 - the loop ends the run with a reason, as locally
            return {"ok": False, "kind": type(exc).__name__, "message": str(exc), "pieces": pieces}
        finally:
            beating.cancel()
        return {"ok": True, "response": response_out(clean_response(response, task["model"])), "pieces": pieces}

    @activity.defn(name=TOOL_ACTIVITY)
    async def agent_tool(self, task: dict[str, Any]) -> dict[str, Any]:
        """{"result", "events"}; before an answer exists for a confirmation {"awaiting": True, "events"};
        when cancelled {"cancelled": True, "events"} (the workflow emits them, then stops)."""
        here = check_revision(task["revision"])
        await self._record(task)
        events: list[list[Any]] = []
        decision = task.get("decision")

        async def approver(tool: Any, args: dict[str, Any], tool_call_id: str) -> bool:
            if decision is None:
                raise _AwaitApproval()
            return bool(decision)

        run = Run(task["run_id"], [lambda e: events.append([e.type, e.tool_call_id, e.step_id, e.skill, e.data])],
                  kind="agent", approver=approver)
        allowed = set(task["allowed_tools"]) if task.get("allowed_tools") is not None else None
        beating = asyncio.get_running_loop().create_task(heartbeat(here.config.heartbeat_timeout / 3))
        try:
            result = await route_in_run(run, here.project, task["tool"], task["arguments"],
                                        tool_call_id=task["tool_call_id"], allowed_tools=allowed, timeout=task.get("timeout"))
        except _AwaitApproval:
            return {"awaiting": True, "events": events}
        except asyncio.CancelledError:  # the run was cancelled: its events so far (ending with the call's error)
            return {"cancelled": True, "events": events}
        finally:
            beating.cancel()
        return {"result": result_out(result), "events": events}

    async def _record(self, task: dict[str, Any]) -> None:
        """The workflow's events before this activity (numbered: a retry rewrites nothing)."""
        if task.get("record"):
            await self.activities.write_rows(task["run_id"], task["record"])

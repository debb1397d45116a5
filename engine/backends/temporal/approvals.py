"""Confirmations inside a Temporal execution: the question outlives every worker and front door.

A `confirm: true` call — a tool called directly (workflows.py, single.py) or by an agent
(agent_workflow.py) — waits in its workflow for the `approve` signal keyed by its
`tool_call_id`, on a durable timer (the approval timeout; no answer is a no). Any process
that reaches Temporal answers it (`send_approval`) and lists what waits (`pending_approvals`);
the first answer for a call wins, and `ANSWER_QUERY` tells a front door which one it was.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ...runtime.router import declined
    from ...runtime.run import Run
    from .protocol import ANSWER_QUERY, APPROVE_SIGNAL, PENDING_QUERY

DEFAULT_APPROVAL_TIMEOUT_S = 600.0


class Confirmable:
    """The approval side of a workflow: the signal, the queries, the wait."""

    def __init__(self) -> None:
        self._answers: dict[str, bool] = {}
        self._waiting: set[str] = set()

    @workflow.signal(name=APPROVE_SIGNAL)
    def approve(self, tool_call_id: str, approve: bool) -> None:
        """An answer from any front door; the first one for a call wins."""
        self._answers.setdefault(tool_call_id, bool(approve))

    @workflow.query(name=PENDING_QUERY)
    def pending_approvals(self) -> list[str]:
        return sorted(self._waiting)

    @workflow.query(name=ANSWER_QUERY)
    def approval_answer(self, tool_call_id: str) -> bool | None:
        return self._answers.get(tool_call_id)

    async def wait_for_answer(self, tool_call_id: str, timeout_s: float) -> bool:
        """The answer to one call (False when the approval timeout passes first)."""
        self._waiting.add(tool_call_id)
        try:
            await workflow.wait_condition(lambda: tool_call_id in self._answers, timeout=timedelta(seconds=timeout_s))
        except asyncio.TimeoutError:
            return False
        finally:
            self._waiting.discard(tool_call_id)
        return self._answers[tool_call_id]

    async def confirm_call(self, call: dict[str, Any], run: Run, record: Any) -> None:
        """A direct call's confirmation, before its body: `confirmation_required` (numbered and
        redacted by the workflow's Run, as the router emits it locally) reaches the store
        (`record`), then the answer; a no is the router's `confirmation_denied`."""
        call_id = call["tool_call_id"]
        run.emit("confirmation_required", {"tool": call["tool"], "arguments": call["arguments"]}, call_id)
        self._waiting.add(call_id)  # listed as pending as soon as the question is stored
        await record()
        if not await self.wait_for_answer(call_id, call.get("approval_timeout") or DEFAULT_APPROVAL_TIMEOUT_S):
            raise declined(call["tool"])

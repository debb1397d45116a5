"""The front door of an agent run on Temporal: start the agent workflow, follow its events.

`TemporalAgent` has the `Agent`'s surface (`run`, `stream`): `skillyard chat`, an
embedder or a service use it as they use a local agent. The loop runs on the workers
(agent_workflow.py); this side opens the live Run (so this process can answer and cancel
it), relays the stored events to its listeners, and answers confirmations: the Run's
approver (the terminal, `--yes`) or any answer given to the Run in this process goes to the
workflow as the `approve` signal. A front door with nobody to ask sends nothing: the call
waits for an answer from any other front door (`send_approval`), up to the approval timeout.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, AsyncIterator

from ...errors import ErrorCode, StepFailure
from ...providers.base import Usage
from ...runs.events import Event, stream_run
from ...runtime.agent import Agent, AgentResult, agent_run_end, as_messages
from ...runtime.ids import new_id
from .agent_protocol import AGENT_WORKFLOW, APPROVE_SIGNAL, PENDING_QUERY, message_in, message_out, result_in
from .client import Follower, TemporalBackend, call_failure, cancel_and_wait
from .confirmation import Answers
from .protocol import EXECUTOR
from .revision import project_revision

if TYPE_CHECKING:
    from ..._engine import Engine
    from ...runs.live import RunEnd
    from ...runs.run import Run
    from ...runtime.project import Project


def agent_for(engine: "Engine", agent: Agent) -> "Agent | TemporalAgent":
    """`agent` as it runs with the engine's backend: on Temporal when the engine has that backend."""
    if isinstance(engine.backend, TemporalBackend):
        return TemporalAgent(engine, engine.backend, agent)
    return agent


async def send_approval(client: Any, run_id: str, tool_call_id: str, approve: bool) -> None:
    """Answer a pending confirmation of a run on Temporal (an agent run's call, or a direct call of a
    `confirm: true` tool), from any front door."""
    await client.get_workflow_handle(run_id).signal(APPROVE_SIGNAL, args=[tool_call_id, approve])


async def pending_approvals(client: Any, run_id: str) -> list[str]:
    """The tool_call_ids of a run on Temporal (an agent run, or a direct call) that wait for an answer."""
    return list(await client.get_workflow_handle(run_id).query(PENDING_QUERY))


class TemporalAgent:
    """An agent whose loop is a Temporal workflow execution (workflow id = the run id)."""

    def __init__(self, engine: "Engine", backend: TemporalBackend, agent: Agent) -> None:
        self.engine = engine
        self.backend = backend
        self.agent = agent
        self.model = agent.model

    async def run(self, messages: str | list[Any], *, on_event: Any = None, run_id: str | None = None,
                  principal: str | None = None, session: str | None = None) -> AgentResult:
        """Run the loop on the workers to a stop; on cancellation the execution is cancelled too.
        `session`: this front door reads its history from the store and writes the turn at the end."""
        if session is not None:
            from ...runtime.turns import session_turn

            run_id = run_id or new_id("run")
            return await session_turn(lambda sent: self.run(sent, on_event=on_event, run_id=run_id, principal=principal),
                                      self.engine.sessions, self.engine.project.redactor, session, messages, run_id, principal)
        agent = self.agent
        parsed = as_messages(messages)  # a bad message raises here, before any run opens
        run, queued = self.engine.open_run(run_id or new_id("run"), on_event, kind="agent", name=agent.model,
                                           principal=principal, approver=agent.approve)
        cancelled: list[AgentResult] = []  # a cancelled run's own result (a crash ends the run in error)

        def end_of(run: "Run", result: AgentResult | None) -> "RunEnd":
            return agent_run_end(result if result is not None else cancelled[0] if cancelled else None)

        return await self.engine.live.drive(run, queued, self._run(run, parsed, cancelled), end_of)

    async def stream(self, messages: str | list[Any], **options: Any) -> AsyncIterator[Event]:
        """Yield the run's events as they are stored; the last one is `agent_done` (as `Agent.stream`)."""
        async for event in stream_run(
            lambda listener: self.run(messages, on_event=listener, **options), lambda e: e.type == "agent_done"
        ):
            yield event

    async def _run(self, run: "Run", messages: list[Any], cancelled: list[AgentResult]) -> AgentResult:
        from temporalio.client import WorkflowFailureError

        agent = self.agent
        try:
            client = await self.backend.client()
        except StepFailure as unreachable:  # no Temporal server at the address: the run stops, saying where it looked
            return AgentResult(run.run_id, "error", "", messages, error=unreachable.message)
        revision = _revision(self.engine.project)
        call = {"revision": revision, "run_id": run.run_id, "model": agent.model,
                "tools": sorted(agent.tools) if agent.tools is not None else None,
                "limits": dict(agent.limits.__dict__), "tool_choice": agent.tool_choice, "system": agent.system,
                "messages": [message_out(m) for m in messages], "principal": run.principal,
                "approval_timeout": run.approval_timeout,
                "output_schema": agent.answer.raw if agent.answer is not None else None, "repairs": agent.repairs}
        self.backend.store.record_executor(run.run_id, EXECUTOR)  # if the worker writing its row dies, another ends it
        handle = await client.start_workflow(AGENT_WORKFLOW, call, id=run.run_id, task_queue=self.backend.config.task_queue)
        follower = Follower(self.backend.store, run, 0)
        answers = Answers(self.engine.project.tools, run, handle)
        follower.listeners.append(answers.heard)
        try:
            outcome = await follower.follow(asyncio.ensure_future(handle.result()))
        except WorkflowFailureError as exc:
            await follower.catch_up(None)
            failure, _ = call_failure(exc, run.run_id, agent.model, revision)
            if failure.code == ErrorCode.CANCELLED:  # cancelled from another front door: agent_done said so
                return AgentResult(run.run_id, "cancelled", "", messages)
            return AgentResult(run.run_id, "error", "", messages, error=failure.message)
        except asyncio.CancelledError:
            if not answers.ended:  # after agent_done the execution only finishes: nothing left to cancel
                await asyncio.shield(cancel_and_wait(handle, follower))
            cancelled.append(AgentResult(run.run_id, "cancelled", "", messages))
            raise
        finally:
            answers.close()
        await follower.catch_up(outcome["last_seq"])
        return _result(run.run_id, outcome)


_last_revision: "tuple[Project, str] | None" = None


def _revision(project: "Project") -> str:
    """The linked project's revision, hashed once per linked project (not per run)."""
    global _last_revision
    last = _last_revision
    if last is None or last[0] is not project:
        last = _last_revision = (project, project_revision(project))
    return last[1]


def _result(run_id: str, outcome: dict[str, Any]) -> AgentResult:
    return AgentResult(run_id, outcome["stop_reason"], outcome["answer"],
                       [message_in(m) for m in outcome.get("messages", ())],
                       [result_in(r) for r in outcome["tool_results"]], Usage(*outcome["usage"]), outcome["steps"],
                       outcome["error"], data=outcome.get("data"), error_details=outcome.get("error_details"))

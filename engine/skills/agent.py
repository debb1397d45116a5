"""Agent skills: a model working with tools as one step of a workflow.

```yaml
skills:
  researchCompany:
    kind: agent
    system: You research companies for interview preparation.
    user: "What should a candidate know about {{ company }}?"
    tools: [fetchPage, companyFacts]
    limits: {max_steps: 6, total_timeout: 60s}
    output: {type: object, properties: {facts: {type: array}}}
```

The step runs the agent loop (runtime/agent.py) inside the workflow's own call: every event
of the agent — `agent_start`, model deltas, reasoning, its tool calls (their own
`tool_call_id`s and steps) and `agent_done` — is an event of the outer run carrying the step's
`step_id` and `skill`; an inner `confirm: true` tool asks whoever answers the outer call's
approvals; cancelling the outer call cancels the loop and its tool calls. Everything that can
be is done at link time: templates parsed, limits merged, the answer schema compiled.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import jinja2

from ..errors import ErrorCode, StepFailure
from ..lang.templating import LazyTemplate
from ..runtime.agent import Agent, AgentLimits, AgentResult, run_in
from ..runtime.answers import AnswerSchema
from ..runtime.context import SkillContext
from ..runtime.contracts import Skill


class StepEvents:
    """A Run seen from inside an agent step: what is emitted without a step of its own carries
    the step's `step_id` and `skill` (an inner tool's own workflow steps keep theirs)."""

    __slots__ = ("_run", "_step_id", "_skill")

    def __init__(self, run: Any, step_id: str, skill: str):
        self._run, self._step_id, self._skill = run, step_id, skill

    def emit(self, type: Any, data: dict[str, Any], tool_call_id: str | None = None, step_id: str | None = None,
             skill: str | None = None, result: Any = None, clean: bool = False) -> Any:
        if step_id is None:
            step_id, skill = self._step_id, self._skill
        return self._run.emit(type, data, tool_call_id, step_id, skill, result, clean)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)  # everything else (ids, scrubbing, approvals) is the Run's own


class AgentSkill(Skill):
    kind = "agent"

    def __init__(self, name: str, *, model: str | None, system: str | None, user: str, tools: list[str],
                 limits: AgentLimits, input_schema: dict[str, Any], output_schema: dict[str, Any] | None,
                 repairs: int, where: Callable[[str, int], Any] | None = None):
        """`limits`: the project's `agent:` limits lowered by the skill's (linked); `where(field,
        line)`: where a line of a template sits in the YAML (for render errors)."""
        super().__init__(name, input_schema, output_schema)
        self.model = model
        self.system = LazyTemplate(system, partial(where, "system") if where else None, input_schema) if system else None
        self.user = LazyTemplate(user, partial(where, "user") if where else None, input_schema)
        self.tools = tuple(tools)
        self.limits = limits
        self.repairs = repairs
        self.answer = AnswerSchema.of(output_schema, self.output_schema) if output_schema is not None else None

    @property
    def produces(self) -> dict[str, Any]:
        return self.output_schema_raw if self.output_schema_raw is not None else {"type": "string"}

    def _render(self, input: dict[str, Any]) -> tuple[str | None, str]:
        """(system, user) for `input`. Values are data: they are inserted, never evaluated."""
        template = self.system
        try:
            system = template.render(input) if template else None
            template = self.user
            return system, template.render(input)
        except jinja2.TemplateError as exc:
            assert template is not None
            raise StepFailure(ErrorCode.EXECUTION_ERROR,
                              f"prompt of agent skill {self.name!r} failed to render: {template.explain(exc)}") from None

    def agent(self, input: dict[str, Any], model: str) -> tuple[Agent, str]:
        """The Agent this step runs for `input` with `model`, and its user message (a durable
        backend builds the same one in its agent workflow). It opens no run: it runs in the step's (`run_in`)."""
        system, user = self._render(input)
        return Agent(None, model, tools=self.tools, limits=self.limits, system=system, output_schema=self.answer,
                     repairs=self.repairs), user

    def output(self, result: AgentResult) -> Any:
        """The step's output from its agent's result (typed by `output`), or its StepFailure."""
        if result.stop_reason == "answer":
            return result.data if self.answer is not None else result.answer
        raise _stopped(self.name, result)

    async def run(self, input: dict[str, Any], ctx: SkillContext) -> Any:
        project = ctx.call.project
        agent, user = self.agent(input, ctx.call.model_override or self.model or project.default_model)
        result = await run_in(agent, StepEvents(ctx.call.run, ctx.step_id, ctx.skill), project, user)  # type: ignore[arg-type]  # a step's events stand in for the run's
        ctx.add_usage(result.usage)
        return self.output(result)


def _stopped(name: str, result: AgentResult) -> StepFailure:
    """The step's failure when its agent stopped without an answer, by the stop's own code."""
    reason = result.stop_reason
    code = ErrorCode.EXECUTION_ERROR if reason == "error" else ErrorCode.named(reason)
    message = f"agent skill {name!r} stopped ({reason})" + (f": {result.error}" if result.error else "")
    details = result.error_details if result.error_details is not None else {"answer": result.answer[:2000]}
    return StepFailure(code, message, details, retryable=reason in ("invalid_output", "timeout", "error"))

"""Tool skills: a registered tool type (e.g. `fetch`) as a workflow step.

```yaml
skills:
  readPage:
    kind: tool
    type: fetch
    config: {allowedDomains: ["*.python.org"], parseMode: markdown}
```

The step's input is the type's input schema (for fetch: url, method, headers, body); its
output is the type's output schema, so later steps can map `$steps.read.output.content`.
Progress the executor reports becomes `skill_progress_delta`; its failures keep their codes
(`blocked`, `http_error`…).
"""

from __future__ import annotations

from typing import Any

from ..runtime.context import CallContext, SkillContext
from ..runtime.contracts import Skill, ToolExecutor


class _StepRun:
    """A CallContext seen from inside a step: the executor's tool progress is skill progress."""

    def __init__(self, ctx: SkillContext):
        self._ctx = ctx
        run: CallContext = ctx.call
        self.run_id = run.run_id
        self.tool_call_id = run.tool_call_id
        self.tool = run.tool
        self.run = run.run
        self.project = run.project
        self.model_override = run.model_override

    @property
    def usage(self) -> Any:
        return self._ctx.call.usage

    def tool_progress(self, stage: str, message: str, **data: Any) -> None:
        self._ctx.progress(message, stage=stage, **data)


class ToolSkill(Skill):
    kind = "tool"

    def __init__(self, name: str, executor: ToolExecutor, input_schema: dict[str, Any], output_schema: dict[str, Any] | None):
        super().__init__(name, input_schema, output_schema)
        self.executor = executor

    async def run(self, input: dict[str, Any], ctx: SkillContext) -> Any:
        return await self.executor.execute(input, _StepRun(ctx))  # type: ignore[arg-type]  # the step's view of the call

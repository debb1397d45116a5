"""Replay a recorded tool run offline: the same input, the recorded model answers, the recorded
tool output.

Every prompt skill's request is compared with the recorded one (in order). If it is the same,
the recorded answer is returned without calling any model. If the prompt changed, the step
fails with the difference instead of calling a model, so a prompt or workflow change can be
checked for free.

Nothing reaches outside either: a `kind: tool` step (a fetch…) answers with the output its step
recorded, and a tool that is not a workflow (a fetch tool, a python tool) with the run's
recorded output. Python and template skills run again: they are the code being checked.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
from typing import Any, Callable

from ..errors import ErrorCode, StepFailure
from ..executors.workflow import WorkflowExecutor
from ..providers.base import ModelRequest, ModelResponse, ProviderError
from ..runs.payloads import SkillError, SkillResult, SkillStart, Where
from ..runtime.context import SkillContext
from ..runtime.project import Project
from ..spec.models import ModelSpec

REPLAY_MODEL = "__replay__"


class PromptChanged(ProviderError):
    def __init__(self, step_id: str | None, diff: str):
        super().__init__(f"the prompt of step {step_id!r} differs from the recorded one:\n{diff}")
        self.step_id = step_id
        self.diff = diff


class ReplayProvider:
    """Answers with recorded responses, in recorded order, if the prompt is unchanged."""

    def __init__(self, exchanges: list[dict[str, Any]]):
        self.exchanges = exchanges
        self.position = 0
        self.mismatches: list[PromptChanged] = []

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        if self.position >= len(self.exchanges):
            raise ProviderError(f"the recording has only {len(self.exchanges)} model answers; this run asks for more")
        recorded = self.exchanges[self.position]
        self.position += 1
        now = [{"role": m.role, "content": m.content} for m in request.messages]
        if now != recorded["messages"]:
            mismatch = PromptChanged(recorded.get("step_id"), _diff(recorded["messages"], now))
            self.mismatches.append(mismatch)
            raise mismatch
        if on_text is not None:
            on_text(recorded["response"])
        return ModelResponse(recorded["response"])


class Recording:
    """What a recorded run's tools returned: the run's own outcome, and the last outcome (output, or
    error code and message) of each `kind: tool` step, by step id and item (a forEach runs a step
    once per item), with the input it was given."""

    def __init__(self, status: str, output: Any, error: Any, events: list[dict[str, Any]]):
        self.outcome = _outcome(status == "ok", output, error)
        self.steps: dict[str, list[tuple[str, tuple[bool, Any]]]] = {}
        inputs: dict[tuple[Any, Any], str] = {}
        outcomes: dict[tuple[Any, Any], tuple[bool, Any]] = {}
        for event in events:
            kind = event["type"]
            data: Any = event.get("data") or {}  # read as its type's payload
            where: Where = data
            key = (event.get("step_id"), where.get("item_index"))
            if kind == "skill_start":
                start: SkillStart = data
                if start["kind"] == "tool":
                    inputs[key] = _canonical(start["input"])
            elif kind == "skill_result" and key in inputs:
                result: SkillResult = data
                outcomes[key] = (True, result["output"])
            elif kind == "skill_error" and key in inputs:
                failed: SkillError = data
                outcomes[key] = (False, {"code": failed["code"], "message": failed["message"]})
        for key, outcome in outcomes.items():
            self.steps.setdefault(key[0], []).append((inputs[key], outcome))

    @classmethod
    def of(cls, run: Any, events: list[dict[str, Any]]) -> "Recording":
        """From a RunRecord and its stored events."""
        return cls(run.status, run.output, run.error, events)

    def step(self, skill: str, input: Any, ctx: SkillContext) -> Any:
        """The recorded outcome of this step for this input (else its first one not yet used)."""
        entries = self.steps.get(ctx.step_id)
        if not entries:
            raise StepFailure(ErrorCode.EXECUTION_ERROR, f"step {ctx.step_id!r} calls tool skill {skill!r}, and the "
                              "recording holds no output of that step; replay never calls a tool")
        wanted = _canonical(input)
        index = next((i for i, (given, _) in enumerate(entries) if given == wanted), 0)
        outcome = entries[index][1] if len(entries) == 1 else entries.pop(index)[1]
        return _answer(outcome)

    def tool(self) -> Any:
        return _answer(self.outcome)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _outcome(ok: bool, output: Any, error: Any) -> tuple[bool, Any]:
    return (True, output) if ok else (False, error if isinstance(error, dict) else {"message": str(error)})


def _answer(outcome: tuple[bool, Any]) -> Any:
    ok, value = outcome
    if ok:
        return value
    raise StepFailure(str(value.get("code") or "execution_error"), f"(recorded) {value.get('message') or 'failed'}")


class _RecordedExecutor:
    """A tool that is not a workflow (fetch, python…): answers with the run's recorded result."""

    def __init__(self, kind: str, recording: Recording):
        self.kind = kind
        self.recording = recording

    async def execute(self, args: dict[str, Any], run: Any) -> Any:
        return self.recording.tool()


def replay_project(project: Project, provider: ReplayProvider, recording: Recording | None = None) -> Project:
    """A project whose replay model answers from the recording.

    With `recording`, nothing reaches outside either: the project is linked again from its
    directory (the given one is left as it is), its `kind: tool` skills answer with their
    recorded outputs and a tool that is not a workflow with the run's recorded result.
    """
    models = {**project.models, REPLAY_MODEL: ModelSpec(provider="replay")}
    if recording is None:
        return dataclasses.replace(project, models=models, _providers={REPLAY_MODEL: provider})
    from ..link.linker import load_project  # a copy of its own: its tool skills are changed below

    fresh = load_project(project.root)
    for skill in fresh.skills.values():
        if skill.kind == "tool":
            skill.call = functools.partial(_recorded_step, recording, skill.name)
    tools = {name: tool if isinstance(tool.executor, WorkflowExecutor)
             else dataclasses.replace(tool, executor=_RecordedExecutor(tool.executor.kind, recording))
             for name, tool in fresh.tools.items()}
    return dataclasses.replace(fresh, models={**fresh.models, REPLAY_MODEL: models[REPLAY_MODEL]}, tools=tools,
                               _providers={REPLAY_MODEL: provider})


async def _recorded_step(recording: Recording, skill: str, input: Any, ctx: SkillContext) -> Any:
    return recording.step(skill, input, ctx)


def _diff(before: list[dict[str, str]], after: list[dict[str, str]]) -> str:
    def lines(messages: list[dict[str, str]]) -> list[str]:
        out = []
        for message in messages:
            out.append(f"[{message['role']}]")
            out.extend(message["content"].splitlines())
        return out

    return "\n".join(difflib.unified_diff(lines(before), lines(after), "recorded", "now", lineterm="", n=2))

"""What a running tool call and a running skill can see.

A call's context is a `CallContext`: one tool call inside a run, never the run itself (that is
its `run`, engine/runs/run.py). It was called `RunContext`, and its Run `events`; both old
names still work, with a DeprecationWarning.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from ..providers.base import AnswerBudget, ModelRequest, ModelResponse, Provider, Usage

NO_USAGE = Usage()

if TYPE_CHECKING:
    from ..safety.redaction import Redactor
    from ..spec.models import ModelSpec
    from .run import Run, ToolToApprove


class CallProject(Protocol):
    """What the code a call runs (an executor, a skill) reads of its project: a `Project`
    (project.py). A Protocol, because the Project holds the linked tools and skills, whose
    contracts (contracts.py) name this module's contexts: it sits above this module."""

    @property
    def default_model(self) -> str: ...

    @property
    def redactor(self) -> "Redactor": ...

    @property
    def answer_budget(self) -> "AnswerBudget": ...

    def provider(self, model_name: str) -> "tuple[Provider, ModelSpec]": ...

    @property
    def tools(self) -> "Mapping[str, ToolToApprove]":
        """The project's tools by name: what a call that asks for confirmation elsewhere (a
        durable backend's) shows the approver of the tool asking."""


def _renamed(old: str, new: str) -> None:
    warnings.warn(f"{old} is now {new}", DeprecationWarning, stacklevel=3)


class CallContext:
    """One tool call in flight: its ids, the Run it belongs to (its events, approvals), the
    project it runs on."""

    __slots__ = ("run_id", "tool_call_id", "tool", "run", "project", "model_override", "usage")

    def __init__(
        self,
        run_id: str,
        tool_call_id: str,
        tool: str,
        run: "Run",
        project: CallProject,
        model_override: str | None = None,
    ):
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.tool = tool
        self.run = run
        self.project = project
        self.model_override = model_override
        self.usage = NO_USAGE  # Usage is immutable: add_usage replaces it

    @property
    def events(self) -> "Run":
        """The call's Run, by its old name."""
        _renamed("CallContext.events", "CallContext.run")
        return self.run

    def tool_progress(self, stage: str, message: str, **data: Any) -> None:
        self.run.emit(
            "tool_progress_delta", {"stage": stage, "message": message, **data}, tool_call_id=self.tool_call_id
        )


class SkillContext:
    """Handed to python skills: report progress, know where you run."""

    __slots__ = ("call", "step_id", "skill", "attempt")

    def __init__(self, call: CallContext, step_id: str, skill: str, attempt: int = 1):
        self.call = call  # the tool call this skill's step runs in
        self.step_id = step_id
        self.skill = skill
        self.attempt = attempt

    @property
    def run(self) -> CallContext:
        """The call, by its old name."""
        _renamed("SkillContext.run", "SkillContext.call")
        return self.call

    @property
    def run_id(self) -> str:
        return self.call.run_id

    def progress(self, message: str, **data: Any) -> None:
        """Tell listeners something true about the work: `ctx.progress("parsed", rows=1204)`."""
        self.call.run.emit(
            "skill_progress_delta",
            {"message": message, **data},
            tool_call_id=self.call.tool_call_id,
            step_id=self.step_id,
            skill=self.skill,
        )

    def add_usage(self, usage: Usage) -> None:
        self.call.usage = self.call.usage + usage

    def model_exchange(self, model: str, attempt: int, request: "ModelRequest", response: "ModelResponse") -> None:
        """Record what was asked and answered (run detail pages, replay without a model)."""
        self.call.run.emit(
            "model_exchange",
            {
                "model": model,
                "attempt": attempt,
                "messages": [{"role": m.role, "content": m.content} for m in request.messages],
                "output_schema": request.output_schema is not None,
                "response": response.text,
                "usage": response.usage.as_dict(),
            },
            tool_call_id=self.call.tool_call_id,
            step_id=self.step_id,
            skill=self.skill,
        )


def __getattr__(name: str) -> Any:
    if name == "RunContext":  # the old name of CallContext
        _renamed("engine.runtime.context.RunContext", "CallContext")
        return CallContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""What a running tool call and a running skill can see."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..providers.base import ModelRequest, ModelResponse, Provider, Usage

NO_USAGE = Usage()

if TYPE_CHECKING:
    from ..safety.redaction import Redactor
    from ..spec.models import ModelSpec
    from ..spec.settings import EngineSettings
    from .run import Run


class CallProject(Protocol):
    """What the code a call runs (an executor, a skill) reads of its project: a `Project`
    (project.py). A Protocol, because the Project holds the linked tools and skills, whose
    contracts (contracts.py) name this module's contexts: it sits above this module."""

    @property
    def default_model(self) -> str: ...

    @property
    def redactor(self) -> "Redactor": ...

    @property
    def settings(self) -> "EngineSettings": ...

    def provider(self, model_name: str) -> "tuple[Provider, ModelSpec]": ...


class RunContext:
    """One tool call in flight: its ids, its event stream, the project it runs on."""

    __slots__ = ("run_id", "tool_call_id", "tool", "events", "project", "model_override", "usage")

    def __init__(
        self,
        run_id: str,
        tool_call_id: str,
        tool: str,
        events: "Run",
        project: CallProject,
        model_override: str | None = None,
    ):
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.tool = tool
        self.events = events
        self.project = project
        self.model_override = model_override
        self.usage = NO_USAGE  # Usage is immutable: add_usage replaces it

    def tool_progress(self, stage: str, message: str, **data: Any) -> None:
        self.events.emit(
            "tool_progress_delta", {"stage": stage, "message": message, **data}, tool_call_id=self.tool_call_id
        )


class SkillContext:
    """Handed to python skills: report progress, know where you run."""

    __slots__ = ("run", "step_id", "skill", "attempt")

    def __init__(self, run: RunContext, step_id: str, skill: str, attempt: int = 1):
        self.run = run
        self.step_id = step_id
        self.skill = skill
        self.attempt = attempt

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def progress(self, message: str, **data: Any) -> None:
        """Tell listeners something true about the work: `ctx.progress("parsed", rows=1204)`."""
        self.run.events.emit(
            "skill_progress_delta",
            {"message": message, **data},
            tool_call_id=self.run.tool_call_id,
            step_id=self.step_id,
            skill=self.skill,
        )

    def add_usage(self, usage: Usage) -> None:
        self.run.usage = self.run.usage + usage

    def model_exchange(self, model: str, attempt: int, request: "ModelRequest", response: "ModelResponse") -> None:
        """Record what was asked and answered (run detail pages, replay without a model)."""
        self.run.events.emit(
            "model_exchange",
            {
                "model": model,
                "attempt": attempt,
                "messages": [{"role": m.role, "content": m.content} for m in request.messages],
                "output_schema": request.output_schema is not None,
                "response": response.text,
                "usage": response.usage.as_dict(),
            },
            tool_call_id=self.run.tool_call_id,
            step_id=self.step_id,
            skill=self.skill,
        )

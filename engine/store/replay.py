"""Replay a recorded tool run offline: the same input, the recorded model answers.

Every prompt skill's request is compared with the recorded one (in order). If it is the same,
the recorded answer is returned without calling any model. If the prompt changed, the step
fails with the difference instead of calling a model, so a prompt or workflow change can be
checked for free.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable

from ..providers.base import ModelRequest, ModelResponse, ProviderError
from ..project import Project
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


def replay_project(project: Project, provider: ReplayProvider) -> Project:
    """A copy of `project` whose replay model answers from the recording."""
    models = {**project.models, REPLAY_MODEL: ModelSpec(provider="replay")}
    return dataclasses.replace(project, models=models, _providers={REPLAY_MODEL: provider})


def _diff(before: list[dict[str, str]], after: list[dict[str, str]]) -> str:
    def lines(messages: list[dict[str, str]]) -> list[str]:
        out = []
        for message in messages:
            out.append(f"[{message['role']}]")
            out.extend(message["content"].splitlines())
        return out

    return "\n".join(difflib.unified_diff(lines(before), lines(after), "recorded", "now", lineterm="", n=2))

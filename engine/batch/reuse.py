"""`skillyard batch --replay-from FILE`: reuse the recorded model answers of an earlier batch.

The runs named in FILE had their prompts and answers recorded (the run store's model
exchanges, as `runs replay` uses them). A prompt sent again word for word, to the same model,
gets its recorded answer instead of a model call; any other prompt — the steps a prompt or
workflow edit touched — asks the model as usual. So re-checking a prompt edit over a dataset
costs only the calls the edit changed.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

from ..errors import UsageError
from ..providers.base import ModelRequest, ModelResponse, Provider
from ..runtime.project import Project
from ..store import Store

AnswerKey = tuple[str, str]  # (model name, the messages as canonical JSON)


def recorded_answers(store: Store, run_ids: list[str]) -> dict[AnswerKey, str]:
    """Every recorded (model, prompt) → answer of these runs (the last attempt wins)."""
    answers: dict[AnswerKey, str] = {}
    for run_id in run_ids:
        for exchange in store.model_exchanges(run_id):
            answers[(str(exchange["model"]), _canonical(exchange["messages"]))] = exchange["response"]
    return answers


def _canonical(messages: Any) -> str:
    return json.dumps(messages, ensure_ascii=False, sort_keys=True)


class ReusingProvider:
    """Answers a recorded prompt from the recording, any other through the model's own provider."""

    def __init__(self, model_name: str, inner: Callable[[], Provider], answers: dict[AnswerKey, str], tally: "ReuseTally"):
        self.model_name, self.inner, self.answers, self.tally = model_name, inner, answers, tally

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        recorded = None if request.tools else self.answers.get((self.model_name, _canonical(messages)))
        if recorded is None:
            self.tally.asked += 1
            return await self.inner().request(request, on_text)
        self.tally.reused += 1
        if on_text is not None:
            on_text(recorded)
        return ModelResponse(recorded)  # no usage: nothing was paid for


@dataclasses.dataclass
class ReuseTally:
    reused: int = 0
    asked: int = 0


def reusing_project(project: Project, answers: dict[AnswerKey, str], tally: ReuseTally) -> Project:
    """`project` whose every model first looks the prompt up in `answers`."""
    if not answers:
        raise UsageError("--replay-from: the run store holds no model answers for the runs of that file "
                         "(were they recorded with --no-store, or pruned?)")

    def inner(name: str) -> Callable[[], Provider]:
        return lambda: project.provider(name)[0]

    providers: dict[str, Provider] = {name: ReusingProvider(name, inner(name), answers, tally) for name in project.models}
    return dataclasses.replace(project, _providers=providers)

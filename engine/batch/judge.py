"""Run a judge skill on one case: {case, output} in, {pass, score?, reason} out.

A judge is an ordinary skill of the project (a python function or a prompt: an LLM judge),
linked and checked at load like every other. It runs outside any tool call, in a Run of its
own that no listener records: its verdict lands in the batch's results, not in the run store.
"""

from __future__ import annotations

import inspect
from typing import Any

from .._engine import Engine
from ..errors import StepFailure, UsageError
from ..link.expect import JudgeError
from ..runtime.context import CallContext, SkillContext
from ..runtime.ids import new_id
from ..runtime.run import Run

JUDGE_OUTPUT = "{pass: boolean, score?: number, reason: string}"


def check_judge(engine: Engine, name: str) -> None:
    """Refuse a judge whose declared output cannot be a verdict, before any case runs."""
    skill = engine.project.skills.get(name)
    if skill is None:
        raise UsageError(f"judge {name!r}: no such skill; declare it in skills.yaml")
    schema = skill.output_schema_raw
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    if not isinstance(properties.get("pass"), dict) or properties["pass"].get("type") != "boolean" or "reason" not in properties:
        raise UsageError(f"judge {name!r}: its output schema must declare {JUDGE_OUTPUT}; "
                         "add `pass` (boolean) and `reason` (string) to its output properties")


class Judges:
    """Calls judge skills for one batch; adds up the tokens their models used."""

    def __init__(self, engine: Engine, model: str | None = None):
        self.engine = engine
        self.model = model
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd: float | None = None  # only when a judge's model has prices

    async def __call__(self, name: str, payload: dict[str, Any]) -> dict[str, Any]:
        project = self.engine.project
        skill = project.skills[name]
        violations = skill.input_schema.check(payload)
        if violations:
            raise JudgeError(f"its input schema refuses {{case, output}}: {violations[0].pointer or '/'}: {violations[0].message}")
        run = Run(new_id("run"), [], project.redactor.for_run(), "tool", f"judge {name}")
        context = CallContext(run.run_id, new_id("call"), f"judge {name}", run, project, self.model)
        try:
            answer = skill.call(payload, SkillContext(context, "judge", name) if skill.needs_context else None)
            if inspect.isawaitable(answer):
                answer = await answer
        except StepFailure as exc:
            raise JudgeError(f"{exc.code}: {exc.message}") from None
        except Exception as exc:  # noqa: BLE001 - the user's judge code failed: a failed verdict, not a crash
            raise JudgeError(f"{type(exc).__name__}: {exc}") from None
        finally:
            run.finish("ok")
            self.input_tokens += context.usage.input_tokens
            self.output_tokens += context.usage.output_tokens
            if context.usage.cost_usd is not None:
                self.cost_usd = (self.cost_usd or 0.0) + context.usage.cost_usd
        return _verdict_of(skill, answer)


def _verdict_of(skill: Any, answer: Any) -> dict[str, Any]:
    if skill.output_schema is not None:
        violations = skill.output_schema.check(answer)
        if violations:
            raise JudgeError(f"its answer does not match its output schema: {violations[0].pointer or '/'}: {violations[0].message}")
    if not isinstance(answer, dict) or not isinstance(answer.get("pass"), bool):
        raise JudgeError(f"it must answer {JUDGE_OUTPUT}")
    return answer

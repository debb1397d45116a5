"""Typed answers: a model's answer read as JSON and checked against a schema, and the repair
policy for one that is not (prompt skills and the agent loop share it: one copy of the rule).

An `AnswerSchema` is built once (at link time for a skill, once per Agent): the compiled
validator, the OpenAI strict form (engine.lang.strict_schema; None when the schema does not
qualify) and the instruction that asks a model for the JSON. A wrong answer gets the
validation errors fed back (`repair_message`) up to `repairs` times; then it is refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..lang.schema import CompiledSchema
from ..lang.strict_schema import StrictSchema, to_strict

DEFAULT_REPAIRS = 2  # retries with the validation errors fed back (a prompt skill's `repairs`)
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


@dataclass(frozen=True, eq=False)
class AnswerSchema:
    """What an answer must be, compiled once."""

    raw: dict[str, Any]
    compiled: CompiledSchema
    strict: StrictSchema | None  # the form a strict `response_format` sends (None: sent as written)
    instruction: str

    @classmethod
    def of(cls, schema: dict[str, Any], compiled: CompiledSchema | None = None) -> "AnswerSchema":
        """`schema` compiled (or with its compiled form), its strict form and instruction computed."""
        form = to_strict(schema) if schema.get("type") == "object" else None
        return cls(schema, compiled or CompiledSchema(schema), form if isinstance(form, StrictSchema) else None,
                   "Answer with one JSON value only, no prose, matching this JSON Schema:\n"
                   + json.dumps(schema, ensure_ascii=False))

    def parse(self, text: str) -> tuple[Any, list[dict[str, str]]]:
        """The answer's JSON value (a ```json fence around it is fine) and what is wrong with it,
        in the shape of argument errors (`pointer`, `message`, `keyword`)."""
        candidate = text.strip()
        fenced = _FENCE.match(candidate)
        if fenced:
            candidate = fenced.group(1)
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError as exc:
            return None, [{"pointer": "/", "message": f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                           "keyword": "json"}]
        return value, [v.as_dict() for v in self.compiled.check(value)]


def problem_lines(problems: list[dict[str, str]]) -> list[str]:
    """Each problem as `pointer: message`."""
    return [f"{p['pointer']}: {p['message']}" for p in problems]


def repair_message(problems: list[dict[str, str]]) -> str:
    """The user turn that asks a model to correct an invalid answer."""
    return ("Your answer was not valid:\n- " + "\n- ".join(problem_lines(problems)[:10])
            + "\nAnswer again with only the corrected JSON.")


def refusal_details(problems: list[dict[str, str]], text: str) -> dict[str, Any]:
    """The `details` of an answer refused after its repairs: the errors, and the last answer."""
    return {"errors": problems[:20], "output": text[:2000]}


def with_instruction(system: str | None, answer: AnswerSchema | None) -> str | None:
    """A system prompt with the answer's instruction after it (for models without native enforcement)."""
    if answer is None:
        return system
    return f"{system}\n\n{answer.instruction}" if system else answer.instruction

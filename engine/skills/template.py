"""Template skills: render Jinja2 to text, or to JSON when an output schema is declared."""

from __future__ import annotations

import json
from functools import partial
from typing import Any, Callable

import jinja2

from ..errors import ErrorCode, StepFailure
from ..lang.templating import LazyTemplate
from ..runtime.context import SkillContext
from ..runtime.contracts import Skill


class TemplateSkill(Skill):
    kind = "template"

    def __init__(self, name: str, template: str, input_schema: dict[str, Any], output_schema: dict[str, Any] | None,
                 where: Callable[[str, int], Any] | None = None):
        """`where(field, line)`: where a line of the template sits in the YAML (for render errors)."""
        super().__init__(name, input_schema, output_schema)
        self.template = LazyTemplate(template, partial(where, "template") if where else None, input_schema)

    @property
    def produces(self) -> dict[str, Any]:
        return self.output_schema_raw if self.output_schema_raw is not None else {"type": "string"}

    async def run(self, input: dict[str, Any], ctx: SkillContext) -> Any:
        try:
            text = self.template.render(input)
        except jinja2.TemplateError as exc:
            raise StepFailure(ErrorCode.EXECUTION_ERROR, f"template skill {self.name!r} failed to render: {self.template.explain(exc)}") from None
        ctx.progress("template rendered", chars=len(text))
        if self.output_schema is None:
            return text
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise StepFailure(
                ErrorCode.EXECUTION_ERROR,
                f"template {self.name!r} rendered invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                {"hint": "use the tojson filter for values, e.g. {{ title | tojson }}"},
            ) from None

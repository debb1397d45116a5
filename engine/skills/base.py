"""What every skill kind provides to the workflow executor."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable

from ..context import SkillContext
from ..schema import CompiledSchema


class Skill(ABC):
    """A linked skill: validated input in, output out (validated by the executor)."""

    kind: str

    def __init__(self, name: str, input_schema: dict[str, Any], output_schema: dict[str, Any] | None):
        self.name = name
        self.input_schema_raw = input_schema
        self.output_schema_raw = output_schema
        self.input_schema = CompiledSchema(input_schema)
        self.output_schema = CompiledSchema(output_schema) if output_schema is not None else None
        # Set by the Project from its redaction settings: True when the schema proves that
        # no sensitive key can appear, so events need not walk the value (see Redactor.schema_is_clean).
        self.input_clean = False
        self.output_clean = False
        # How the executor calls the skill: `call(input, ctx)` returns the output or an
        # awaitable of it. Kinds that can, point it straight at the user's function, so a
        # step costs no wrapper coroutine. `needs_context=False`: `ctx` may be None.
        self.call: Callable[[dict[str, Any], SkillContext | None], Any] = self.run
        self.needs_context = True

    @property
    def produces(self) -> dict[str, Any] | None:
        """The schema of what this skill returns, for link-time data-flow checks (None: anything)."""
        return self.output_schema_raw

    @abstractmethod
    async def run(self, input: dict[str, Any], ctx: SkillContext) -> Any:
        """Do the work. Raise StepFailure for a failure the caller should see by code."""

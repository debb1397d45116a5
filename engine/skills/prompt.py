"""Prompt skills: render templates, ask a model, validate (and repair) its answer."""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Callable

import jinja2

from ..errors import ErrorCode, StepFailure
from ..lang.templating import LazyTemplate
from ..providers.base import ChatMessage, ModelRequest, ProviderError, clean_response
from ..providers.pricing import priced_response
from ..runtime.answers import AnswerSchema, problem_lines, refusal_details, repair_message, with_instruction
from ..runtime.context import SkillContext
from ..runtime.contracts import Skill

STREAM_PROGRESS_EVERY_S = 0.1


class PromptSkill(Skill):
    kind = "prompt"

    def __init__(
        self,
        name: str,
        *,
        model: str | None,
        system: str | None,
        user: str,
        input_schema: dict[str, Any],
        output_schema: dict[str, Any] | None,
        temperature: float | None,
        max_tokens: int | None,
        repairs: int,
        where: Callable[[str, int], Any] | None = None,
    ):
        """`where(field, line)`: where a line of a template sits in the YAML (for render errors)."""
        super().__init__(name, input_schema, output_schema)
        self.model = model
        self.system = LazyTemplate(system, partial(where, "system") if where else None, input_schema) if system else None
        self.user = LazyTemplate(user, partial(where, "user") if where else None, input_schema)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.repairs = repairs
        # what the answer must be, compiled once (its validator, strict form and instruction)
        self.answer = AnswerSchema.of(output_schema, self.output_schema) if output_schema is not None else None

    @property
    def produces(self) -> dict[str, Any]:
        return self.output_schema_raw if self.output_schema_raw is not None else {"type": "string"}

    def render(self, input: dict[str, Any]) -> tuple[ChatMessage, ...]:
        """The messages for `input`. Values are data: they are inserted, never evaluated."""
        template = self.system
        try:
            system = template.render(input) if template else ""
            template = self.user
            user = template.render(input)
        except jinja2.TemplateError as exc:
            assert template is not None
            raise StepFailure(ErrorCode.EXECUTION_ERROR, f"prompt of skill {self.name!r} failed to render: {template.explain(exc)}") from None
        system = with_instruction(system, self.answer) or ""
        messages = [ChatMessage("system", system)] if system else []
        messages.append(ChatMessage("user", user))
        return tuple(messages)

    async def run(self, input: dict[str, Any], ctx: SkillContext) -> Any:
        messages = self.render(input)
        chars = sum(len(m.content) for m in messages)
        ctx.progress(f"prompt rendered: {chars:,} chars", stage="rendered", chars=chars)
        model_name = ctx.call.model_override or self.model or ctx.call.project.default_model
        provider, spec = ctx.call.project.provider(model_name)
        attempts = self.repairs + 1
        for attempt in range(1, attempts + 1):
            request = ModelRequest(
                messages=messages,
                model=spec.model,
                output_schema=self.output_schema_raw,
                output_strict=self.answer.strict if self.answer is not None else None,
                temperature=self.temperature if self.temperature is not None else spec.temperature,
                max_tokens=self.max_tokens or spec.max_tokens,
                budget=ctx.call.project.answer_budget,
            )
            ctx.progress("model call started", stage="model_call", model=model_name, attempt=attempt)
            stream = _StreamProgress(ctx)
            try:
                response = await provider.request(request, stream.on_text)
            except ProviderError as exc:  # the message may echo a configured key: the run's error never does
                message = ctx.call.run.scrub_text(f"model {model_name!r} failed: {exc}")
                raise StepFailure(ErrorCode.EXECUTION_ERROR, message, retryable=exc.retryable) from None
            response = priced_response(clean_response(response, model_name), spec.prices)
            ctx.add_usage(response.usage)
            ctx.model_exchange(model_name, attempt, request, response)
            ctx.progress(
                f"model answered: {len(response.text):,} chars in all",
                stage="answered",
                chars=len(response.text),
                chunks=stream.chunks,
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
            )
            if self.answer is None:
                return response.text
            value, problems = self.answer.parse(response.text)
            if not problems:
                ctx.progress("output validated", stage="validated")
                return value
            lines = problem_lines(problems)
            if attempt == attempts:
                raise StepFailure(
                    ErrorCode.INVALID_MODEL_OUTPUT,
                    f"model {model_name!r} gave output that does not match skill {self.name!r}'s output schema "
                    f"after {attempts} attempt(s): {lines[0]}",
                    refusal_details(problems, response.text),
                    retryable=True,
                )
            ctx.progress(f"retry {attempt} of {attempts - 1}: output invalid", stage="repair", attempt=attempt, errors=lines[:5])
            messages = messages + (
                ChatMessage("assistant", response.text),
                ChatMessage("user", repair_message(problems)),
            )
        raise AssertionError("unreachable")  # pragma: no cover


class _StreamProgress:
    """Turns streamed text into at most ~10 progress events per second, plus counts."""

    __slots__ = ("ctx", "chunks", "chars", "_last")

    def __init__(self, ctx: SkillContext):
        self.ctx = ctx
        self.chunks = 0
        self.chars = 0
        self._last = 0.0

    def on_text(self, piece: str) -> None:
        self.chunks += 1
        self.chars += len(piece)
        now = time.monotonic()
        if self.chunks == 1 or now - self._last >= STREAM_PROGRESS_EVERY_S:
            self._last = now
            # "so far": a log shows this line and the answer's own ("model answered: 901 chars"); a
            # bare "24 chars received" before it read like an answer cut short
            self.ctx.progress(f"receiving the answer: {self.chars:,} chars so far", stage="streaming", chars=self.chars,
                              chunks=self.chunks)

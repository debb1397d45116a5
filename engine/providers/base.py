"""Provider protocol and the engine's own message types (the registry of providers is registry.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol

from ..errors import ProviderError  # noqa: F401 - part of the provider seam (defined with the error tree)
from ..lang.strict_schema import StrictSchema
from ..safety.untrusted import scrub_surrogates


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to call a tool. `arguments` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """The engine's own message type; providers translate it to and from their wire format."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # on role "tool": which call this answers
    name: str | None = None  # on role "tool": the tool's name (Anthropic does not need it; others may)
    is_error: bool = False  # on role "tool": the call failed (Anthropic's `is_error`)
    # on role "assistant": the provider's reasoning blocks that must go back with this turn in a
    # tool loop (Anthropic `thinking` with its `signature`, `redacted_thinking`), as the wire had them
    reasoning: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a model answer used. `cost_usd` is set by the engine (engine.pricing) from the
    model's configured prices, never by a provider; None: no prices, so no cost is claimed.
    `model`: set when a fallback model answered (providers/fallback.py), which priced it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    model: str | None = None

    def __add__(self, other: "Usage") -> "Usage":
        mine, theirs = self.cost_usd, other.cost_usd
        cost = None if mine is None and theirs is None else (mine or 0.0) + (theirs or 0.0)
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens, cost)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form in events, results and the store: `cost_usd` only when it is known."""
        if self.cost_usd is None:
            return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost_usd": round(self.cost_usd, 9)}


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What a skill asks of a model. `output_schema` asks for JSON matching it; `output_strict` is
    its OpenAI strict form, computed at link time (None: the schema is sent as written).
    `tools` carry their own strict form the same way (`"strict"`: the parameters to send strict)."""

    messages: tuple[ChatMessage, ...]
    model: str | None = None  # the provider's model id
    output_schema: dict[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    tools: tuple[dict[str, Any], ...] = ()  # in the engine's neutral form: name, description, parameters
    tool_choice: str = "auto"  # auto | none | required | <tool name>
    output_strict: StrictSchema | None = None


@dataclass(frozen=True, slots=True)
class ModelResponse:
    text: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: tuple[dict[str, Any], ...] = ()  # the blocks to send back with this turn (ChatMessage.reasoning)


def clean_response(response: ModelResponse, model: str) -> ModelResponse:
    """The response with lone UTF-16 surrogates in its text and tool-call arguments replaced (U+FFFD).

    A model's output is outside data (engine.untrusted): a lone surrogate would break every
    UTF-8 sink (SQLite, SSE, JSON bodies). A replacement is noted in the log, at info.
    """
    text, changed = scrub_surrogates(response.text)
    calls = response.tool_calls
    fixed = []
    for call in calls:
        name, n_name = scrub_surrogates(call.name)
        arguments, n_args = scrub_surrogates(call.arguments)
        changed += n_name + n_args
        fixed.append(call if not (n_name or n_args) else ToolCall(call.id, name, arguments))
    if not changed:
        return response
    from ..logging import logger

    logger.info("model output held lone UTF-16 surrogates; replaced with U+FFFD", model=model, strings=changed)
    return ModelResponse(text, response.usage, response.finish_reason, tuple(fixed), response.reasoning)


def without_key(message: str, key: str | None) -> str:
    """A provider error text with the model's API key replaced (some endpoints echo it)."""
    if key and len(key) >= 4 and key in message:
        return message.replace(key, "[REDACTED]")
    return message


def reasoning_sink(on_text: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Where a provider sends streamed reasoning text: `on_text.on_reasoning`, when the caller
    gave one (the agent loop's `TextSinks`); a caller without one never sees reasoning."""
    return getattr(on_text, "on_reasoning", None)


class Provider(Protocol):
    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        """Send the request; call `on_text` with each piece of streamed text (and
        `reasoning_sink(on_text)`, when there is one, with each piece of reasoning); return the whole answer."""
        ...

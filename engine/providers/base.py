"""Provider protocol and the engine's own message types (the registry of providers is registry.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol

from ..errors import LimitExceeded, ProviderError  # noqa: F401 - part of the provider seam (defined with the error tree)
from ..lang.strict_schema import StrictSchema
from ..safety.untrusted import scrub_surrogates
from ..spec.settings import DEFAULT_MAX_ANSWER_CHARS, DEFAULT_MAX_TOOL_ARGS_BYTES


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
class AnswerBudget:
    """How much of one model answer a provider reads (`limits.max_tool_args_bytes`,
    `limits.max_answer_chars`). A model's answer is untrusted input: a model, or whatever answers
    at its base_url, may stream without end; past the budget the call ends with
    `limit_exceeded` and the connection is dropped, so memory stays bounded."""

    max_tool_args_bytes: int = DEFAULT_MAX_TOOL_ARGS_BYTES
    max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS

    @classmethod
    def of(cls, limits: Any) -> "AnswerBudget":
        """The budget of a project's `limits:` (LimitSettings)."""
        return cls(limits.max_tool_args_bytes, limits.max_answer_chars)

    @property
    def body_bytes(self) -> int:
        """The most bytes read of a plain answer's body or of one event of a streamed one: room
        for the whole answer JSON-escaped (4 bytes a character, twice the arguments) and its envelope."""
        return 4 * self.max_answer_chars + 2 * self.max_tool_args_bytes + 65_536

    def body_over(self, read: int) -> LimitExceeded:
        return LimitExceeded("limits.max_answer_chars", self.max_answer_chars,
                             f"the model endpoint sent more than {self.body_bytes:,} bytes in one answer (or one event "
                             f"of it; read {read:,}): past what limits.max_answer_chars and limits.max_tool_args_bytes "
                             "allow (config/engine.yaml); the call was ended")


class AnswerMeter:
    """Counts one answer as it arrives against its budget; LimitExceeded at the first piece past it."""

    __slots__ = ("budget", "chars", "arg_bytes")

    def __init__(self, budget: AnswerBudget):
        self.budget = budget
        self.chars = 0
        self.arg_bytes = 0

    def text(self, piece: str) -> None:
        """Text or reasoning of the answer."""
        self.chars += len(piece)
        if self.chars > self.budget.max_answer_chars:
            limit = self.budget.max_answer_chars
            raise LimitExceeded("limits.max_answer_chars", limit,
                                f"the model's answer passed {limit:,} characters (limits.max_answer_chars in "
                                "config/engine.yaml); the call was ended. Ask for a shorter answer (max_tokens), "
                                "or raise the limit")

    def arguments(self, piece: str) -> None:
        """Tool-call argument text of the answer (all its calls together)."""
        self.arg_bytes += len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
        if self.arg_bytes > self.budget.max_tool_args_bytes:
            limit = self.budget.max_tool_args_bytes
            raise LimitExceeded("limits.max_tool_args_bytes", limit,
                                f"the model's tool-call arguments passed {limit:,} bytes (limits.max_tool_args_bytes "
                                "in config/engine.yaml); the call was ended")


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
    budget: AnswerBudget = AnswerBudget()  # how much of the answer is read (the project's `limits:`)


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


def streams(spec_stream: bool | None, on_text: Callable[[str], None] | None) -> bool:
    """Whether a provider streams the answer: when its caller takes text as it comes (`on_text`),
    unless the model's `stream:` (config/models.yaml) forces either. A plain request costs the
    client less: one body, parsed once."""
    return spec_stream if spec_stream is not None else on_text is not None


class Provider(Protocol):
    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        """Send the request; call `on_text` with each piece of streamed text (and
        `reasoning_sink(on_text)`, when there is one, with each piece of reasoning); return the whole answer.
        No `on_text`: nobody takes the text as it comes, so the answer may come in one plain body
        (`streams`). Reads at most `request.budget` of the answer (LimitExceeded past it)."""
        ...

"""Provider protocol, the engine's own message types, and the provider registry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol

from ..spec.models import ModelSpec


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What a skill asks of a model. `output_schema` asks for JSON matching it."""

    messages: tuple[ChatMessage, ...]
    model: str | None = None  # the provider's model id
    output_schema: dict[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    tools: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class ModelResponse:
    text: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    tool_calls: tuple[dict[str, Any], ...] = ()


class ProviderError(Exception):
    """A model call failed (network, auth, rate limit…). `retryable` tells the caller."""

    def __init__(self, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


class Provider(Protocol):
    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        """Send the request; call `on_text` with each piece of streamed text; return the whole answer."""
        ...


ProviderFactory = Callable[[ModelSpec], Provider]
_FACTORIES: dict[str, ProviderFactory] = {}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make `provider: <name>` usable in config/models.yaml."""
    _FACTORIES[name] = factory


def provider_factory(name: str) -> ProviderFactory | None:
    _register_builtins()
    return _FACTORIES.get(name)


def known_providers() -> list[str]:
    _register_builtins()
    return sorted(_FACTORIES)


def _register_builtins() -> None:
    """Imported late so that importing skillyard does not import every provider."""
    if "mock" not in _FACTORIES:
        from .mock import MockProvider

        _FACTORIES["mock"] = lambda spec: MockProvider()

"""Model providers: the narrow seam between skills and any model API.

A provider is one method, `request(request, on_text) -> ModelResponse`. Skills never know
which provider answers. New providers register a factory with `register_provider`.
"""

from .base import (
    ChatMessage,
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderError,
    ProviderFactory,
    ToolCall,
    Usage,
    provider_factory,
    register_provider,
)

__all__ = [
    "ChatMessage",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ProviderError",
    "ProviderFactory",
    "ToolCall",
    "Usage",
    "provider_factory",
    "register_provider",
]

"""Model providers: the narrow seam between skills and any model API.

A provider is one method, `request(request, on_text) -> ModelResponse` (base.py). Skills never
know which provider answers. New providers register a factory with `register_provider`
(registry.py); pricing.py turns a model's token counts into a cost.
"""

from .base import ChatMessage, ModelRequest, ModelResponse, Provider, ProviderError, ToolCall, Usage
from .registry import ProviderFactory, provider_factory, register_provider

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

"""The provider registry: `provider:` in config/models.yaml → a factory that builds a Provider.

The built-in providers (mock, openai, anthropic, scripted) are registered on first lookup and
imported only when a model uses them, so importing skillyard imports no provider SDK.
Embedders add their own with `register_provider` (exported by `engine`). `build_provider` is
what a model name gets: its provider, wrapped in a FallbackProvider when it has `fallback:`.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Callable, cast

from ..spec.models import ModelSpec
from .base import Provider

ProviderFactory = Callable[[ModelSpec, Path], Provider]  # (model spec, project directory)
_FACTORIES: dict[str, ProviderFactory] = {}


def register_provider(name: str, factory: ProviderFactory | Callable[[ModelSpec], Provider]) -> None:
    """Make `provider: <name>` usable in config/models.yaml.

    The factory takes `(spec)` or `(spec, project_dir)` and returns a Provider.
    """
    _register_builtins()
    try:
        wants_dir = len(inspect.signature(factory).parameters) >= 2
    except (TypeError, ValueError):
        wants_dir = True
    if wants_dir:  # the signature tells which of the two it is; the type cannot
        _FACTORIES[name] = cast(ProviderFactory, factory)
    else:
        one = cast(Callable[[ModelSpec], Provider], factory)
        _FACTORIES[name] = lambda spec, root: one(spec)


def provider_factory(name: str) -> ProviderFactory | None:
    _register_builtins()
    return _FACTORIES.get(name)


def build_provider(name: str, models: dict[str, ModelSpec], build: Callable[[str], Provider]) -> Provider:
    """The provider a request to model `name` goes to: `build(name)` (the model's own), or,
    when it has `fallback:`, a FallbackProvider over its chain (providers/fallback.py)."""
    if not models[name].fallback:
        return build(name)
    from .fallback import FallbackProvider, fallback_chain

    return FallbackProvider(fallback_chain(name, models), models, build)


def known_providers() -> list[str]:
    _register_builtins()
    return sorted(_FACTORIES)


def _register_builtins() -> None:
    """Imported late so that importing skillyard does not import every provider."""
    if "mock" in _FACTORIES:
        return
    from .mock import MockProvider

    _FACTORIES["mock"] = lambda spec, root: MockProvider()
    _FACTORIES.setdefault("openai", _openai)
    _FACTORIES.setdefault("anthropic", _anthropic)
    _FACTORIES.setdefault("scripted", _scripted)


def _openai(spec: ModelSpec, root: Path) -> Provider:
    from .openai import OpenAIProvider  # the SDK is imported only when such a model is used

    return OpenAIProvider(spec)


def _anthropic(spec: ModelSpec, root: Path) -> Provider:
    from .anthropic import AnthropicProvider  # the anthropic SDK; imported when such a model is used

    return AnthropicProvider(spec)


def _scripted(spec: ModelSpec, root: Path) -> Provider:
    from .scripted import ScriptedProvider

    return ScriptedProvider.from_spec(spec, root)

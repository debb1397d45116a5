"""Model fallback: `fallback: [modelB, modelC]` on a model in config/models.yaml.

`FallbackProvider` stands where the model's own provider would (the registry builds it, see
`build_provider`), so neither the agent loop nor prompt skills know about it. A request that
fails for a reason worth trying elsewhere — the provider's `ProviderError.retryable`: a
connection error, a timeout, a 5xx or overloaded answer, a 429 after the SDK's own retries —
goes, unchanged but for the model id, to the next model of the chain, and a `model_fallback`
event `{from, to, reason}` records it in the run (`MODEL_EVENTS`, set by the Engine when it
opens a run). Once any part of an answer reached the caller (`on_text`), the error stands:
the caller cannot take back what it already showed.

The chain is the model's list followed depth first through each fallback's own list, every
model once (cycles are load errors, engine.link.linker). An answer from a fallback model is
priced with that model's prices and marked with its name (`Usage.model`), so usage and cost
are counted per model actually used.
"""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Any, Callable, Protocol

from ..spec.models import ModelSpec
from .base import ModelRequest, ModelResponse, Provider, ProviderError
from .pricing import priced


class EventSink(Protocol):
    """The part of a Run the fallback reports to."""

    @property
    def done(self) -> bool: ...

    def emit(self, type: Any, data: dict[str, Any]) -> Any: ...


# The run a model request is made for, by a weak reference (the run holds its task, the task
# its context): set by the Engine when it opens a run; None outside one.
MODEL_EVENTS: contextvars.ContextVar[Callable[[], EventSink | None] | None] = contextvars.ContextVar(
    "skillyard_model_events", default=None)


def fallback_chain(name: str, models: dict[str, ModelSpec]) -> list[str]:
    """`name`, then its fallbacks depth first through their own `fallback:`, each model once."""
    chain: list[str] = []
    todo = [name]
    while todo:
        current = todo.pop()
        if current in chain or current not in models:
            continue
        chain.append(current)
        todo.extend(reversed(models[current].fallback))
    return chain


class FallbackProvider:
    """A model's provider that hands a failed request on to the next model of its chain.

    `build(name)` makes a model's own provider (raising ProviderError when it cannot): the
    first model's at once, the others' only when a request first falls back to them.
    """

    def __init__(self, chain: list[str], models: dict[str, ModelSpec], build: Callable[[str], Provider]):
        self.chain = chain
        self._models = models
        self._build = build
        self._providers: dict[str, Provider] = {chain[0]: build(chain[0])}

    def _provider(self, name: str) -> Provider:
        provider = self._providers.get(name)
        if provider is None:
            provider = self._providers[name] = self._build(name)
        return provider

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        watched = None if on_text is None else _Watched(on_text)
        last = len(self.chain) - 1
        for index, name in enumerate(self.chain):
            spec = self._models[name]
            try:
                asked = request if index == 0 else dataclasses.replace(request, model=spec.model)
                response = await self._provider(name).request(asked, watched)
            except ProviderError as exc:
                if index == last or not exc.retryable or (watched is not None and watched.streamed):
                    if index == 0:
                        raise
                    raise ProviderError(f"{exc} (models tried: {', '.join(self.chain[: index + 1])})",
                                        retryable=exc.retryable) from None
                _announce(name, self.chain[index + 1], str(exc))
                continue
            if index == 0:
                return response  # priced by the caller with this model's prices, as without fallback
            usage = dataclasses.replace(priced(response.usage, spec.prices), model=name)
            return dataclasses.replace(response, usage=usage)
        raise AssertionError("unreachable")  # pragma: no cover - the chain is never empty


def _announce(failed: str, next_model: str, reason: str) -> None:
    """The `model_fallback` event, in the run the request is made for (none outside a run)."""
    ref = MODEL_EVENTS.get()
    run = ref() if ref is not None else None
    if run is not None and not run.done:
        run.emit("model_fallback", {"from": failed, "to": next_model, "reason": reason})
    else:
        from ..logging import logger

        logger.warning("model fallback", from_model=failed, to_model=next_model, reason=reason)


class _Watched:
    """The caller's `on_text`, noting whether anything reached it. Other streams a provider
    finds on it (`on_text.on_reasoning`) pass through and count too."""

    __slots__ = ("_inner", "streamed")

    def __init__(self, inner: Callable[[str], None]):
        self._inner = inner
        self.streamed = False

    def __call__(self, piece: str) -> None:
        self.streamed = True
        self._inner(piece)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if not callable(found):
            return found

        def watched(*args: Any, **kwargs: Any) -> Any:
            self.streamed = True
            return found(*args, **kwargs)

        return watched

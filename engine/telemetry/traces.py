"""The traces of one engine (or one worker process): which tracer provider, decided once at start.

Every front door goes through here — the service, `run-workflow`/`skillyard call`, `chat`,
`batch`, `mcp`, `worker` and an embedder's `Engine(…)` — so one rule decides for all:

1. a provider given to `Engine(…, tracer_provider=…)`: always used (the caller owns it);
2. else, unless `OTEL_SDK_DISABLED=true` / `OTEL_TRACES_EXPORTER=none`: the application's
   global SDK provider, when it has set one (`trace.set_tracer_provider`, `opentelemetry-instrument`);
3. else `telemetry:` in config/engine.yaml and the `OTEL_*` variables (`config.resolve`): a
   provider of the engine's own, with a batch processor, shut down (its spans sent) by
   `Engine.close()` and, failing that, by the SDK at interpreter exit;
4. else off: None, and nothing of OpenTelemetry is imported.

Standard library only at import: deciding that traces are off imports nothing else.
"""

from __future__ import annotations

import sys
import weakref
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping

from .config import TelemetryUnavailable, resolve

if TYPE_CHECKING:
    from .otel import SpanSink

_SINKS: "weakref.WeakSet[SpanSink]" = weakref.WeakSet()  # the span sinks alive in this process (see `carrier`)


def global_provider() -> Any:
    """The application's global tracer provider, or None when none was set (or OpenTelemetry
    was never imported: then nobody can have set one, and it stays unimported)."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return None
    provider = api.get_tracer_provider()
    return None if isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider)) else provider


class Traces:
    """One engine's spans: a `SpanSink` on its events, over a tracer of `provider`."""

    def __init__(self, provider: Any, *, owned: bool, why: str) -> None:
        self.provider = provider
        self.owned = owned  # built here from telemetry:/OTEL_*: ours to shut down
        self.why = why  # which rule turned traces on (for messages and docs)
        self.tracer = provider.get_tracer("skillyard")
        self._unsubscribe: Callable[[], None] | None = None
        self._closed = False

    def attach(self, subscribe: Callable[..., Callable[[], None]], live_runs: Mapping[str, Any]) -> None:
        """Listen to an engine's runs (`engine.subscribe`, `engine.runs`)."""
        from .otel import SpanSink

        sink = SpanSink(self.tracer, live_runs)
        _SINKS.add(sink)
        self._unsubscribe = subscribe(sink)

    def root_span(self, name: str, attributes: dict[str, Any]) -> ContextManager[Any]:
        """A span that starts a trace of its own, current while the block runs (the runs started
        inside are its children): a batch case."""
        from .otel import continued_span

        return continued_span(self.tracer, name, None, attributes)

    def flush(self) -> None:
        """Send the spans batched so far (a provider without `force_flush` has nothing batched)."""
        force_flush = getattr(self.provider, "force_flush", None)
        if force_flush is not None:
            force_flush()

    def close(self) -> None:
        """Stop listening; shut our own provider down (which sends what is batched). A provider
        given by the caller, or the application's global one, is theirs: only flushed."""
        if self._unsubscribe is not None:
            try:
                self._unsubscribe()
            except ValueError:  # already unsubscribed
                pass
            self._unsubscribe = None
        if not self.owned:
            self.flush()
        elif not self._closed:
            self._closed = True
            self.provider.shutdown()


def open_traces(settings: Any, provider: Any = None, environ: Mapping[str, str] | None = None) -> Traces | None:
    """The traces of a project (`settings`: its `EngineSettings.telemetry`) by the rule above;
    None when off. Raises TelemetryUnavailable (a clear message) when on without the SDK."""
    if provider is not None:
        return Traces(provider, owned=False, why="the tracer_provider given to Engine")
    config = resolve(settings, environ)
    if config.disabled:
        return None
    application = global_provider()
    if application is not None:
        return Traces(application, owned=False, why="the application's global tracer provider")
    if not config.traces:
        return None
    try:
        from .otel import tracer_provider
    except ImportError as exc:
        raise TelemetryUnavailable(
            f"traces are on ({config.why}) but OpenTelemetry is not installed ({exc.name}): "
            "pip install 'skillyard[otel]', or turn them off (OTEL_SDK_DISABLED=true)") from None
    return Traces(tracer_provider(config), owned=True, why=config.why)


def open_process_traces(settings: Any) -> Traces | None:
    """The traces of a process that is one front door and nothing else (`skillyard worker`): by
    the same rule, and made the global provider, which code deep in the process (the worker's
    activity spans, an instrumented HTTP client) finds without being handed it."""
    traces = open_traces(settings)
    if traces is not None and traces.owned:
        from opentelemetry import trace

        trace.set_tracer_provider(traces.provider)
    return traces


def carrier(run_id: str, tool_call_id: str | None) -> dict[str, str] | None:
    """The W3C trace context (`traceparent`, `tracestate`) of a call's `execute_tool` span, for a
    process that runs its body elsewhere (a Temporal worker) to continue the trace; None when no
    span sink of this process traces that call."""
    for sink in list(_SINKS):
        found = sink.carrier(run_id, tool_call_id or "")
        if found:
            return found
    return None

"""The telemetry of one service: decided from `telemetry:` and `OTEL_*`, attached to the engine
as listeners, installed in the app (request middleware, `GET /metrics`), closed with it.

When both traces and metrics are off, `open_observability` returns None having imported
nothing: the service and the per-call path are exactly as without telemetry.
"""

from __future__ import annotations

from typing import Any, Callable

from fastapi import FastAPI

from .._engine import Engine
from ..telemetry import TelemetryConfig, TelemetryUnavailable, resolve


class Observability:
    def __init__(self, engine: Engine, config: TelemetryConfig, *, metrics_port: int | None = None,
                 span_exporter: Any = None):
        self.config = config
        self.provider: Any = None
        self.metrics: Any = None
        self._metrics_server: Any = None
        self._unsubscribe: list[Callable[[], None]] = []
        if config.traces:
            self._start_traces(engine, span_exporter)
        if config.metrics or metrics_port is not None:
            self._start_metrics(engine, metrics_port)

    def _start_traces(self, engine: Engine, span_exporter: Any) -> None:
        try:
            from ..telemetry.otel import SpanSink, tracer_provider
        except ImportError as exc:
            raise TelemetryUnavailable(
                f"traces are on ({self.config.why}) but OpenTelemetry is not installed ({exc.name}): "
                "pip install 'skillyard[otel]', or turn them off (OTEL_SDK_DISABLED=true)") from None
        self.provider = tracer_provider(self.config, span_exporter)
        self.tracer = self.provider.get_tracer("skillyard")
        self._unsubscribe.append(engine.subscribe(SpanSink(self.tracer, engine.runs)))

    def _start_metrics(self, engine: Engine, port: int | None) -> None:
        try:
            from ..telemetry.metrics import Metrics, store_queue_depth
        except ImportError:
            raise TelemetryUnavailable("metrics are on but prometheus-client is not installed: "
                                       "pip install prometheus-client") from None
        store = engine.store
        self.metrics = Metrics(engine.runs, write_failures=(lambda: store.write_failures) if store is not None else None,
                               queue_depth=store_queue_depth(store) if store is not None else None)
        self._unsubscribe.append(engine.subscribe(self.metrics))
        if port is not None:
            from prometheus_client import start_http_server

            self._metrics_server, _ = start_http_server(port, addr="127.0.0.1", registry=self.metrics.registry)

    @property
    def metrics_port(self) -> int | None:
        return None if self._metrics_server is None else int(self._metrics_server.server_address[1])

    def install(self, app: FastAPI) -> None:
        """Add the request middleware (call after every other middleware: it must be outermost)
        and `GET /metrics` when `telemetry.metrics` is on."""
        from .tracing import RequestTelemetry

        app.add_middleware(RequestTelemetry, tracer=getattr(self, "tracer", None),
                           streams=self.metrics.sse_streams if self.metrics is not None else None)
        if self.metrics is not None and self.config.metrics:
            from .routes import metrics

            app.include_router(metrics.router(self.metrics.registry))

    def close(self) -> None:
        """Detach from the engine, export the spans still batched, stop the metrics port."""
        for unsubscribe in self._unsubscribe:
            try:
                unsubscribe()
            except ValueError:
                pass
        self._unsubscribe.clear()
        if self.provider is not None:
            self.provider.shutdown()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()


def open_observability(engine: Engine, *, metrics_port: int | None = None, span_exporter: Any = None,
                       environ: Any = None) -> Observability | None:
    """None when traces and metrics are both off. Raises TelemetryUnavailable (a clear message)."""
    config = resolve(engine.project.settings.telemetry, environ)
    if not config.traces and not config.metrics and metrics_port is None:
        return None
    return Observability(engine, config, metrics_port=metrics_port, span_exporter=span_exporter)

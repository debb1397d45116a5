"""The service's side of telemetry: the request middleware (a SERVER span per request, over the
engine's own tracer) and the Prometheus metrics (`GET /metrics`, `--metrics-port`).

Traces belong to the engine (`Engine.traces`, engine/telemetry/traces.py: the same rule for
every front door); the service adds its request spans to them, and sends what is batched when
it stops. When both traces and metrics are off, `open_observability` returns None having
imported nothing: the service and the per-call path are exactly as without telemetry.
"""

from __future__ import annotations

from typing import Any, Callable

from fastapi import FastAPI

from .._engine import Engine
from ..telemetry import TelemetryConfig, TelemetryUnavailable, resolve


class Observability:
    def __init__(self, engine: Engine, config: TelemetryConfig, *, metrics_port: int | None = None):
        self.config = config
        self.traces = engine.traces  # None: traces off
        self.metrics: Any = None
        self._metrics_server: Any = None
        self._unsubscribe: list[Callable[[], None]] = []
        if config.metrics or metrics_port is not None:
            self._start_metrics(engine, metrics_port)

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

        app.add_middleware(RequestTelemetry, tracer=self.traces.tracer if self.traces is not None else None,
                           streams=self.metrics.sse_streams if self.metrics is not None else None)
        if self.metrics is not None and self.config.metrics:
            from .routes import metrics

            app.include_router(metrics.router(self.metrics.registry))

    def close(self) -> None:
        """Detach the metrics from the engine, send the spans still batched, stop the metrics port
        (the engine's traces stay attached: `Engine.close` ends them)."""
        for unsubscribe in self._unsubscribe:
            try:
                unsubscribe()
            except ValueError:
                pass
        self._unsubscribe.clear()
        if self.traces is not None:
            self.traces.flush()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()


def open_observability(engine: Engine, *, metrics_port: int | None = None,
                       environ: Any = None) -> Observability | None:
    """None when the engine has no traces and metrics are off. Raises TelemetryUnavailable (a clear message)."""
    config = resolve(engine.project.settings.telemetry, environ)
    if engine.traces is None and not config.metrics and metrics_port is None:
        return None
    return Observability(engine, config, metrics_port=metrics_port)

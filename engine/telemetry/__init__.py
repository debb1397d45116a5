"""Telemetry: OpenTelemetry spans and Prometheus metrics, built as sinks of a run's events.

Nothing here runs on a call unless it is switched on (`telemetry:` in config/engine.yaml, the
standard `OTEL_*` variables, a tracer provider given to the Engine or set globally): `config`
and `traces` decide with the standard library only, and `otel` / `metrics` (which import their
optional packages) are imported by whoever attaches them. `traces` is the one rule every
front door's Engine follows.
Both are listeners (`engine.subscribe`): the per-call path of the engine is the same with or
without them.
"""

from .config import TelemetryConfig, TelemetryUnavailable, resolve

__all__ = ["TelemetryConfig", "TelemetryUnavailable", "resolve"]

"""Telemetry: OpenTelemetry spans and Prometheus metrics, built as sinks of a run's events.

Nothing here runs on a call unless it is switched on (`telemetry:` in config/engine.yaml or the
standard `OTEL_*` variables): `config` decides with the standard library only, and `otel` /
`metrics` (which import their optional packages) are imported by whoever attaches them.
Both are listeners (`engine.subscribe`): the per-call path of the engine is the same with or
without them.
"""

from .config import TelemetryConfig, TelemetryUnavailable, resolve

__all__ = ["TelemetryConfig", "TelemetryUnavailable", "resolve"]

"""Whether traces and metrics are on, and where spans go: `telemetry:` in config/engine.yaml,
overridden by the standard OpenTelemetry environment variables.

Standard library only: deciding that telemetry is off must import nothing else.

Traces are on when `telemetry.traces: true`, or `OTEL_TRACES_EXPORTER` names an exporter
(`otlp`, `console`), or an OTLP endpoint variable is set; `OTEL_SDK_DISABLED=true` or
`OTEL_TRACES_EXPORTER=none` turns them off whatever else says. Everything else the SDK reads
itself (`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`, `OTEL_RESOURCE_ATTRIBUTES`…).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import UsageError

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
EXPORTERS = ("otlp", "console")


class TelemetryUnavailable(UsageError):
    """Telemetry is switched on but its package is missing or a setting is unusable: the message
    names the setting and the fix (a user mistake: shown without a traceback)."""


@dataclass(frozen=True)
class TelemetryConfig:
    traces: bool
    exporter: str  # otlp | console
    endpoint: str | None  # the full traces URL when it comes from our config; None: the SDK reads OTEL_*
    service_name: str
    metrics: bool
    why: str  # where `traces` was decided (for messages)
    disabled: bool = False  # OTEL_SDK_DISABLED=true / OTEL_TRACES_EXPORTER=none: off whatever else says


def resolve(settings: Any, environ: Mapping[str, str] | None = None, *, metrics: bool | None = None) -> TelemetryConfig:
    """The telemetry of a project: `settings` is its `EngineSettings.telemetry`; `metrics` overrides
    `telemetry.metrics` (e.g. `skillyard serve --metrics-port`)."""
    env = os.environ if environ is None else environ
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint_var = next((name for name in ENDPOINT_VARS if env.get(name, "").strip()), None)
    disabled = env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or exporter == "none"
    if disabled:
        traces, why = False, "OTEL_SDK_DISABLED/OTEL_TRACES_EXPORTER"
    elif exporter:
        if exporter not in EXPORTERS:
            raise TelemetryUnavailable(f"OTEL_TRACES_EXPORTER={exporter!r}: use one of {', '.join(EXPORTERS)} or none")
        traces, why = True, f"OTEL_TRACES_EXPORTER={exporter}"
    elif endpoint_var is not None:
        traces, why = True, endpoint_var
    else:
        traces, why = bool(settings.traces), "telemetry.traces in config/engine.yaml"
    endpoint = None
    if endpoint_var is None and settings.endpoint:
        endpoint = settings.endpoint.rstrip("/") + "/v1/traces"
    service_name = env.get("OTEL_SERVICE_NAME", "").strip() or settings.service_name
    return TelemetryConfig(
        traces=traces, exporter=exporter or "otlp", endpoint=endpoint, service_name=service_name,
        metrics=bool(settings.metrics) if metrics is None else metrics, why=why, disabled=disabled,
    )

"""Prometheus metrics fed by a run's events (a sink), plus gauges read at scrape time.

Counted from events, as they are delivered:

    skillyard_tool_calls_total{tool, code}              code: ok, or the ToolResult error code
    skillyard_tool_call_duration_seconds{tool}          histogram (the call's metadata.duration_ms)
    skillyard_step_duration_seconds{skill, outcome}     histogram of each skill attempt (ok | error)
    skillyard_model_requests_total{model}               prompt-skill and agent model requests
    skillyard_model_tokens_total{model, type}           type: input | output

Read when Prometheus scrapes (nothing per call):

    skillyard_live_runs, skillyard_pending_approvals    from Engine.runs
    skillyard_store_write_failures_total{kind}          the store's write_failures
    skillyard_store_queue_depth                         events recorded, not yet committed by the store's writer
    skillyard_sse_streams                               set by the service's request middleware

A name that is not a tool of the project (`unknown_tool`) is counted as tool="(unknown)": a
caller must not be able to mint label values.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..runs.events import Event
from ..runs.payloads import (
    AgentDone,
    AgentStart,
    ModelCallStart,
    ModelExchange,
    SkillError,
    SkillResult,
    ToolCallError,
    ToolCallResult,
)

if TYPE_CHECKING:
    from ..runs.run import Run

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
UNKNOWN_TOOL = "(unknown)"


class _Live:
    """The gauges of what is live now, read at scrape time."""

    def __init__(self, live_runs: "Mapping[str, Run]", write_failures: Callable[[], Mapping[str, int]] | None,
                 queue_depth: Callable[[], int] | None = None):
        self._live_runs = live_runs
        self._write_failures = write_failures
        self._queue_depth = queue_depth

    def collect(self) -> Iterator[Metric]:
        runs = list(self._live_runs.values())
        yield GaugeMetricFamily("skillyard_live_runs", "Runs executing in this process now", value=len(runs))
        yield GaugeMetricFamily("skillyard_pending_approvals", "Tool calls waiting for a person's approval",
                                value=sum(len(run.pending_approvals) for run in runs))
        failures = CounterMetricFamily("skillyard_store_write_failures", "Events the run store could not write, by kind",
                                       labels=["kind"])
        for kind, count in sorted((self._write_failures() if self._write_failures else {}).items()):
            failures.add_metric([kind], count)
        yield failures
        if self._queue_depth is not None:
            yield GaugeMetricFamily("skillyard_store_queue_depth",
                                    "Events recorded by runs and not yet committed by the store's writer",
                                    value=max(0, self._queue_depth()))


def store_queue_depth(store: Any) -> Callable[[], int]:
    """How many events `store` holds that its writer has not committed (or reported lost) yet."""
    return lambda: int(store.queue_depth)


class Metrics:
    """An engine listener (`engine.subscribe(metrics)`) and the registry Prometheus reads."""

    quiet = True  # it counts events, never shows them as they come: no reason to stream a model's answer (events.quiet)

    def __init__(self, live_runs: "Mapping[str, Run]", *, write_failures: Callable[[], Mapping[str, int]] | None = None,
                 queue_depth: Callable[[], int] | None = None, registry: CollectorRegistry | None = None):
        self.registry = registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.tool_calls = Counter("skillyard_tool_calls", "Tool calls by tool and outcome code (ok or the error code)",
                                  ["tool", "code"], registry=registry)
        self.tool_duration = Histogram("skillyard_tool_call_duration_seconds", "Duration of tool calls", ["tool"],
                                       buckets=BUCKETS, registry=registry)
        self.step_duration = Histogram("skillyard_step_duration_seconds", "Duration of each skill attempt of a step",
                                       ["skill", "outcome"], buckets=BUCKETS, registry=registry)
        self.model_requests = Counter("skillyard_model_requests", "Model requests by model", ["model"], registry=registry)
        self.model_tokens = Counter("skillyard_model_tokens", "Model tokens by model and type (input | output)",
                                    ["model", "type"], registry=registry)
        self.sse_streams = Gauge("skillyard_sse_streams", "Server-sent event responses open now (followers of runs)",
                                 registry=registry)
        registry.register(_Live(live_runs, write_failures, queue_depth))
        self._agent_models: dict[str, str] = {}  # run_id → the agent's model, for its token totals
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        kind = event.type
        if kind == "tool_call_result" or kind == "tool_call_error":
            self._tool_end(event)
        elif kind == "skill_result" or kind == "skill_error":
            ended: SkillResult | SkillError = event.data
            duration = ended.get("duration_ms")
            if duration is not None:
                outcome = "ok" if kind == "skill_result" else "error"
                self.step_duration.labels(str(event.skill), outcome).observe(float(duration) / 1000)
        elif kind == "model_exchange":
            exchange: ModelExchange = event.data
            self._model(exchange["model"], exchange["usage"])
        elif kind == "model_call_start":
            call: ModelCallStart = event.data
            self.model_requests.labels(call["model"]).inc()
        elif kind == "agent_start":
            start: AgentStart = event.data
            with self._lock:
                self._agent_models[event.run_id] = start["model"]
        elif kind == "agent_done":
            done: AgentDone = event.data
            with self._lock:
                model = self._agent_models.pop(event.run_id, "")
            self._tokens(model, done["usage"])

    def _tool_end(self, event: Event) -> None:
        result = event.result
        code = "ok"
        ended: ToolCallResult | ToolCallError = event.data
        if event.type == "tool_call_error":
            failed: ToolCallError = event.data
            code = failed["error"]["code"]
        tool = UNKNOWN_TOOL if code == "unknown_tool" or result is None else result.tool
        self.tool_calls.labels(tool, code).inc()
        duration = ended["metadata"].get("duration_ms")
        if duration is not None:
            self.tool_duration.labels(tool).observe(float(duration) / 1000)

    def _model(self, model: str, usage: Any) -> None:
        self.model_requests.labels(model).inc()
        self._tokens(model, usage)

    def _tokens(self, model: str, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for kind in ("input", "output"):
            count = usage.get(f"{kind}_tokens")
            if count:
                self.model_tokens.labels(model, kind).inc(int(count))

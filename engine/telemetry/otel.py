"""OpenTelemetry spans built from a run's events (a sink: the engine never calls OpenTelemetry).

The span tree of one run, in the OpenTelemetry GenAI conventions:

    [HTTP request span, or the caller's span from `traceparent`]
      invoke_agent                       an agent run (agent_start → agent_done)
        chat <model>                     each model request of the agent (model_call_start → next event),
                                         with span events `gen_ai.reasoning` (how long it thought, how
                                         many characters: never the text) and `skillyard.model_fallback`
        execute_tool <tool>              each tool call (tool_call_start → tool_call_result | _error)
          workflow <name>                a workflow tool (its "prepared" → "done" progress)
            step <step id>               one step, all its attempts ("step_started" → "step_finished")
              skill <skill>              one attempt (skill_start → skill_result | skill_error)
                chat <model>             a prompt skill's model request (model_exchange)
              item <step id> #<index>    a forEach step's item (its first event → "item_finished")
                skill <skill>            the item's attempts, or
                workflow <name>          the sub-workflow it runs (`workflow:` + `forEach:`)
              workflow <name>            a `workflow:` step's sub-workflow; its steps below it

Spans are keyed by (tool call, step id, item index): the items of one forEach step run at
the same time, and every event in an item carries its `item_index` (engine/executors/workflow_nodes.py).

A tool run has `execute_tool` at the top. The parent of the top span is the OpenTelemetry
context current where the run's first event is emitted: the HTTP request span of
`engine.server.tracing` (which continues an incoming `traceparent`), a batch case's span
(engine/batch/runner.py), an embedder's span, or none (a CLI call: a trace of its own).
A Temporal worker continues a call's trace from `SpanSink.carrier` (`continued_span`).

Only what an event carries goes on a span (names, ids, models, token counts, error codes), and
event data is already redacted by the Run; arguments, outputs, messages and error messages are
never copied. Listeners run inline at emit, so times are taken at delivery in nanoseconds
(an event's `ts` is in milliseconds: a 3-step call would be a stack of zero-length spans).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ..runs.events import Event
from ..runs.payloads import (
    AgentDone,
    AgentStart,
    ModelCallStart,
    ModelExchange,
    ModelFallback,
    ReasoningDone,
    SkillError,
    SkillStart,
    ToolCallError,
    ToolCallStart,
    ToolProgressDelta,
    Where,
)
from .config import TelemetryConfig, TelemetryUnavailable

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from ..runs.run import Run

_now = time.time_ns
Key = tuple[str, str, "int | None"]  # (tool_call_id, step_id, item_index): a workflow's key has its caller's step id ("" at the top)


def _key(event: Event) -> Key:
    where: Where = event.data
    return event.tool_call_id or "", event.step_id or where.get("step_id", ""), where.get("item_index")


class _RunSpans:
    """The open spans of one run."""

    __slots__ = ("run_id", "parent", "agent", "model", "first_call", "chat", "tools", "workflows", "steps", "skills",
                 "marks", "items", "each")

    def __init__(self, run_id: str, parent: Any):
        self.run_id = run_id
        self.parent = parent  # OpenTelemetry Context of the top span
        self.agent: Span | None = None
        self.model: str | None = None
        self.first_call: str | None = None  # a tool run ends with the end of its first call
        self.chat: Span | None = None  # the agent's model request in flight
        self.tools: dict[str, Span] = {}
        self.workflows: dict[Key, Span] = {}
        self.steps: dict[Key, Span] = {}
        self.skills: dict[Key, Span] = {}
        self.marks: dict[Key, int] = {}  # where a skill's next model request starts
        self.items: dict[Key, Span] = {}  # forEach items in flight: (call, the forEach step's id, index)
        self.each: set[tuple[str, str]] = set()  # (call, step id) of the forEach steps seen

    def open_spans(self) -> list[Span]:
        """Innermost first: ending them in this order keeps every child inside its parent."""
        spans = [self.chat] if self.chat is not None else []
        spans += [*self.skills.values(), *self.steps.values(), *self.items.values(), *self.workflows.values(),
                  *self.tools.values()]
        return spans + ([self.agent] if self.agent is not None else [])

    def end_call(self, call: str, now: int) -> None:
        """End what is open under one tool call, innermost first."""
        for spans in (self.skills, self.steps, self.items, self.workflows):
            for key in [k for k in spans if k[0] == call]:
                spans.pop(key).end(now)
        self.each = {pair for pair in self.each if pair[0] != call}

    def end_inside(self, item: Key, now: int) -> None:
        """End what is open inside one forEach item (its skills, or its sub-workflow's spans)."""
        call, owner, index = item
        inner = owner + "/"
        for spans in (self.skills, self.steps, self.workflows):
            for key in [k for k in spans if k[0] == call and k[2] == index and (k[1] == owner or k[1].startswith(inner))]:
                spans.pop(key).end(now)


def _fail(span: Span, code: str) -> None:
    span.set_attribute("error.type", code)
    span.set_status(Status(StatusCode.ERROR, code))


class SpanSink:
    """An engine listener (`engine.subscribe(sink)`) that turns each run's events into spans."""

    quiet = True  # it counts events, never shows them as they come: no reason to stream a model's answer (events.quiet)

    def __init__(self, tracer: trace.Tracer, live_runs: "Mapping[str, Run] | None" = None):
        self._tracer = tracer
        self._live_runs = live_runs  # Engine.runs: to close the spans of a run that ends without its last event
        self._runs: dict[str, _RunSpans] = {}
        self._lock = threading.RLock()  # a skill may emit from a worker thread

    def __call__(self, event: Event) -> None:
        handler = _HANDLERS.get(event.type)
        if handler is None:
            return  # text and skill progress deltas: nothing for a span
        now = _now()
        with self._lock:
            state = self._runs.get(event.run_id)
            if state is None:
                state = self._open(event.run_id)
            if state.chat is not None and event.type not in _WITHIN_A_REQUEST:
                state.chat.end(now)  # the agent's model answered: whatever comes next follows its request
                state.chat = None
            handler(self, state, event, now)

    @property
    def open_runs(self) -> int:
        return len(self._runs)

    def carrier(self, run_id: str, tool_call_id: str) -> dict[str, str] | None:
        """The W3C headers of a call's open `execute_tool` span (the propagators of
        OTEL_PROPAGATORS), for a worker to continue the trace; None: not a call of ours."""
        with self._lock:
            state = self._runs.get(run_id)
            span = state.tools.get(tool_call_id) if state is not None else None
        if span is None:
            return None
        found: dict[str, str] = {}
        propagate.inject(found, context=trace.set_span_in_context(span))
        return found

    # ─── run bookkeeping ─────────────────────────────────────────────────────────

    def _open(self, run_id: str) -> _RunSpans:
        state = self._runs[run_id] = _RunSpans(run_id, otel_context.get_current())
        run = self._live_runs.get(run_id) if self._live_runs is not None else None
        if run is not None:
            run.on_end(self._run_ended)
        return state

    def _close(self, run_id: str, now: int, failure: str | None = None) -> None:
        state = self._runs.pop(run_id, None)
        if state is None:
            return
        for span in state.open_spans():
            if failure is not None:
                _fail(span, failure)
            span.end(now)

    def _run_ended(self, run: "Run") -> None:
        """A run cancelled or interrupted mid-call has no closing event: end what is open."""
        with self._lock:
            if run.run_id in self._runs:
                self._close(run.run_id, _now(), run.status if run.status != "ok" else None)

    def _start(self, name: str, parent: Span | None, state: _RunSpans, now: int, attributes: dict[str, Any],
               kind: SpanKind = SpanKind.INTERNAL) -> Span:
        context = state.parent if parent is None else trace.set_span_in_context(parent, state.parent)
        return self._tracer.start_span(name, context=context, kind=kind, attributes=attributes, start_time=now)

    # ─── agent ───────────────────────────────────────────────────────────────────

    def _agent_start(self, state: _RunSpans, event: Event, now: int) -> None:
        if event.step_id is not None:  # an agent step's loop: its step and skill spans cover it
            return
        start: AgentStart = event.data
        state.model = model = start["model"]
        state.agent = self._start("invoke_agent", None, state, now, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": model, "skillyard.run_id": event.run_id})

    def _model_call_start(self, state: _RunSpans, event: Event, now: int) -> None:
        call: ModelCallStart = event.data
        model = call["model"] or state.model or ""
        state.chat = self._start(f"chat {model}", state.agent, state, now, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": model, "skillyard.run_id": event.run_id,
            "skillyard.agent.step": call["step"]}, SpanKind.CLIENT)

    def _reasoning_done(self, state: _RunSpans, event: Event, now: int) -> None:
        """How long the model thought, and how much: a span event on its request. Never the
        text (it may be kept from every sink: `reasoning.send: false`)."""
        span = state.chat or state.agent
        if span is not None:
            done: ReasoningDone = event.data
            span.add_event("gen_ai.reasoning", {"skillyard.reasoning.duration_ms": float(done["duration_ms"]),
                                                "skillyard.reasoning.chars": done["chars"]}, timestamp=now)

    def _fallback(self, state: _RunSpans, event: Event, now: int) -> None:
        """A request that went to the next model (`fallback:` in config/models.yaml)."""
        span = state.chat or state.agent
        if span is not None:
            fallback: ModelFallback = event.data
            span.add_event("skillyard.model_fallback", {"skillyard.fallback.from": fallback["from"],
                                                        "skillyard.fallback.to": fallback["to"],
                                                        "skillyard.fallback.reason": fallback["reason"]},
                           timestamp=now)

    def _agent_done(self, state: _RunSpans, event: Event, now: int) -> None:
        if event.step_id is not None:  # an agent step's end is not its run's
            return
        span = state.agent
        if span is not None:
            done: AgentDone = event.data
            usage, stop = done["usage"], done["stop_reason"]
            span.set_attributes({
                "gen_ai.usage.input_tokens": usage["input_tokens"], "gen_ai.usage.output_tokens": usage["output_tokens"],
                "skillyard.stop_reason": stop, "skillyard.agent.steps": done["steps"]})
            if stop in ("error", "timeout", "cancelled"):
                _fail(span, "agent_" + stop)
        self._close(event.run_id, now)

    # ─── tool calls ──────────────────────────────────────────────────────────────

    def _tool_call_start(self, state: _RunSpans, event: Event, now: int) -> None:
        call = event.tool_call_id or ""
        start: ToolCallStart = event.data
        tool = start["tool"]
        if state.first_call is None and state.agent is None:
            state.first_call = call
        state.tools[call] = self._start(f"execute_tool {tool}", state.agent, state, now, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call,
            "gen_ai.tool.type": "function", "skillyard.run_id": event.run_id})

    def _confirmation(self, state: _RunSpans, event: Event, now: int) -> None:
        span = state.tools.get(event.tool_call_id or "")
        if span is not None:
            span.add_event("confirmation_required", timestamp=now)

    def _tool_end(self, state: _RunSpans, event: Event, now: int) -> None:
        call = event.tool_call_id or ""
        code = None
        if event.type == "tool_call_error":
            failed: ToolCallError = event.data
            code = failed["error"]["code"]
        state.end_call(call, now)
        span = state.tools.pop(call, None)
        if span is not None:
            if code is not None:
                _fail(span, code)
            span.end(now)
        if call == state.first_call:
            self._close(event.run_id, now)

    def _progress(self, state: _RunSpans, event: Event, now: int) -> None:
        """Workflow progress: where a workflow, each step and each forEach item begin and end."""
        key = _key(event)
        call, step_id, _ = key
        progress: ToolProgressDelta = event.data
        stage = progress["stage"]
        if stage == "prepared":  # the tool's workflow (step id ""), or the sub-workflow a step runs
            parent = (self._item(state, key, now) or state.steps.get(key)) if step_id else None
            workflow = str(progress.get("workflow"))
            state.workflows[key] = self._start(f"workflow {workflow}", parent or state.tools.get(call), state, now, {
                "skillyard.workflow": workflow, "skillyard.run_id": event.run_id,
                "skillyard.steps": progress.get("steps", 0), **_item_attribute(key)})
        elif stage == "step_started":
            if "items_total" in progress:
                state.each.add((call, step_id))
            state.steps[key] = self._start(f"step {step_id}", self._container(state, key, now), state, now, {
                "skillyard.step_id": step_id, "skillyard.step": progress.get("step", 0),
                "skillyard.run_id": event.run_id, **_item_attribute(key)})
        elif stage in ("step_finished", "step_cancelled", "item_finished", "done"):
            if stage == "item_finished":  # a failed item's sub-workflow never said "done": end what it left open
                state.end_inside(key, now)
            spans = state.items if stage == "item_finished" else state.workflows if stage == "done" else state.steps
            span = spans.pop(key, None)
            if span is not None:
                span.end(now)

    def _item(self, state: _RunSpans, key: Key, now: int) -> Span | None:
        """The span of the forEach item an event belongs to (opened by the item's first event):
        of the step itself, or of the step whose sub-workflow the event's step is in."""
        call, owner, index = key
        if index is None:
            return None
        while owner and (call, owner) not in state.each:
            owner = owner.rpartition("/")[0]
        if not owner:
            return None
        span = state.items.get((call, owner, index))
        if span is None:
            span = state.items[(call, owner, index)] = self._start(
                f"item {owner} #{index}", state.steps.get((call, owner, None)), state, now,
                {"skillyard.step_id": owner, "skillyard.item_index": index, "skillyard.run_id": state.run_id})
        return span

    def _container(self, state: _RunSpans, key: Key, now: int) -> Span | None:
        """Where a step of `key` runs: its (sub-)workflow in this item, the item, or the tool."""
        call, step_id, index = key
        caller = step_id.rpartition("/")[0]
        return (state.workflows.get((call, caller, index)) or self._item(state, key, now)
                or state.workflows.get((call, caller, None)) or state.tools.get(call))

    # ─── steps and skills ────────────────────────────────────────────────────────

    def _skill_start(self, state: _RunSpans, event: Event, now: int) -> None:
        key = _key(event)
        parent = state.steps.get(key) or self._container(state, key, now)
        start: SkillStart = event.data
        state.skills[key] = self._start(f"skill {event.skill}", parent, state, now, {
            "skillyard.skill": str(event.skill), "skillyard.skill.kind": start["kind"],
            "skillyard.step_id": key[1], "skillyard.attempt": start["attempt"],
            "skillyard.run_id": event.run_id, **_item_attribute(key)})
        state.marks[key] = now

    def _model_exchange(self, state: _RunSpans, event: Event, now: int) -> None:
        """A prompt skill's model request: its event comes with the answer, so it began where
        the skill began or where its previous request ended."""
        key = _key(event)
        exchange: ModelExchange = event.data
        model, usage = exchange["model"], exchange["usage"]
        parent = state.skills.get(key) or state.steps.get(key) or state.tools.get(key[0]) or state.agent
        span = self._start(f"chat {model}", parent, state, state.marks.get(key, now), {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": usage["input_tokens"], "gen_ai.usage.output_tokens": usage["output_tokens"],
            "skillyard.step_id": key[1], "skillyard.attempt": exchange["attempt"],
            "skillyard.run_id": event.run_id, **_item_attribute(key)}, SpanKind.CLIENT)
        span.end(now)
        state.marks[key] = now

    def _skill_end(self, state: _RunSpans, event: Event, now: int) -> None:
        key = _key(event)
        state.marks.pop(key, None)
        span = state.skills.pop(key, None)
        if event.type == "skill_result":
            if span is not None:
                span.end(now)
            return
        failed: SkillError = event.data
        code = failed["code"]
        will_retry = failed.get("will_retry", False)
        if span is None:  # failed before the skill started (its input could not be mapped)
            span = self._start(f"skill {event.skill}", state.steps.get(key) or self._container(state, key, now), state, now, {
                "skillyard.skill": str(event.skill), "skillyard.step_id": key[1], "skillyard.run_id": event.run_id,
                **_item_attribute(key)})
        span.set_attribute("skillyard.will_retry", will_retry)
        _fail(span, code)
        span.end(now)
        if not will_retry:
            step = state.steps.pop(key, None)
            if step is not None:
                _fail(step, code)
                step.end(now)
            item = self._item(state, key, now)
            if item is not None:  # ended by its item_finished (skip, collect) or with the call (fail)
                _fail(item, code)


def _item_attribute(key: Key) -> dict[str, Any]:
    return {} if key[2] is None else {"skillyard.item_index": key[2]}


# Events that happen during a model request: they do not end its span.
_WITHIN_A_REQUEST = frozenset({"model_call_start", "model_reasoning_done", "model_fallback"})

_HANDLERS: dict[str, Callable[[SpanSink, _RunSpans, Event, int], None]] = {
    "agent_start": SpanSink._agent_start,
    "model_call_start": SpanSink._model_call_start,
    "model_reasoning_done": SpanSink._reasoning_done,
    "model_fallback": SpanSink._fallback,
    "final_answer_delta": lambda sink, state, event, now: None,  # ends the model request (in __call__)
    "agent_error": lambda sink, state, event, now: None,  # likewise; agent_done says how the run ended
    "agent_done": SpanSink._agent_done,
    "tool_call_start": SpanSink._tool_call_start,
    "confirmation_required": SpanSink._confirmation,
    "tool_progress_delta": SpanSink._progress,
    "skill_start": SpanSink._skill_start,
    "model_exchange": SpanSink._model_exchange,
    "skill_result": SpanSink._skill_end,
    "skill_error": SpanSink._skill_end,
    "tool_call_result": SpanSink._tool_end,
    "tool_call_error": SpanSink._tool_end,
}


@contextlib.contextmanager
def continued_span(tracer: trace.Tracer, name: str, carrier: Mapping[str, str] | None, attributes: dict[str, Any],
                   kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span]:
    """A span current while the block runs, continuing the trace of `carrier` (W3C headers from
    another process), or the root of a trace of its own (None). An exception ends it with its
    type only: a message may quote input."""
    parent = propagate.extract(carrier) if carrier else otel_context.Context()
    span = tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
    token = otel_context.attach(trace.set_span_in_context(span, parent))
    try:
        yield span
    except BaseException as exc:
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        otel_context.detach(token)
        span.end()


def fail_span(span: Span, code: str) -> None:
    """Mark a span failed with a skillyard error code (never a message)."""
    _fail(span, code)


def tracer_provider(config: TelemetryConfig, exporter: "SpanExporter | None" = None) -> "TracerProvider":
    """The SDK's provider with a batch processor (OTEL_BSP_* apply) on the configured exporter
    (OTLP/HTTP: OTEL_EXPORTER_OTLP_* apply). Not made global: the engine owns it (traces.py)."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
        if exporter is None and config.exporter == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise TelemetryUnavailable(
            f"traces are on ({config.why}) but the OpenTelemetry SDK or its OTLP exporter is not installed "
            f"({exc.name}): pip install 'skillyard[otel]', or turn them off (OTEL_SDK_DISABLED=true)") from None
    provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
    if exporter is None:
        exporter = ConsoleSpanExporter() if config.exporter == "console" else (
            OTLPSpanExporter(endpoint=config.endpoint) if config.endpoint else OTLPSpanExporter())
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider

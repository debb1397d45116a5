"""OpenTelemetry spans from a run's events, checked with the SDK's in-memory exporter; and the
switch: off by default, nothing imported, the standard OTEL_* variables win."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from engine import Engine  # noqa: E402
from engine.spec.models import TelemetrySettings  # noqa: E402
from engine.telemetry import TelemetryUnavailable, resolve  # noqa: E402
from engine.telemetry.otel import SpanSink  # noqa: E402
from telemetry_support import PASSWORD, write_telemetry_project  # noqa: E402


def traced_engine(tmp_path: Path) -> tuple[Engine, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    engine = Engine.from_dir(write_telemetry_project(tmp_path / "p"))
    engine.subscribe(SpanSink(provider.get_tracer("test"), engine.runs))
    return engine, exporter, provider


def tree(spans: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """name → parent name (names are unique within these runs), after checking every parent exists."""
    by_id = {s.context.span_id: s for s in spans}
    out = {}
    for span in spans:
        parent = by_id[span.parent.span_id].name if span.parent is not None else None
        assert span.parent is None or span.parent.span_id in by_id, f"{span.name}: its parent was not exported"
        assert span.start_time <= span.end_time
        if span.parent is not None:
            outer = by_id[span.parent.span_id]
            assert outer.start_time <= span.start_time and span.end_time <= outer.end_time, f"{span.name} outside {outer.name}"
        out[span.name] = parent
    return out


def test_a_three_step_workflow_call_is_a_tree_of_spans(tmp_path: Path) -> None:
    engine, exporter, _ = traced_engine(tmp_path)
    result = asyncio.run(engine.call_tool("report3", {"text": "one two three four"}, tool_call_id="call_1"))
    assert result.ok
    spans = exporter.get_finished_spans()
    assert tree(spans) == {
        "execute_tool report3": None,
        "workflow report3": "execute_tool report3",
        "step count": "workflow report3", "skill count": "step count",
        "step summarize": "workflow report3", "skill summarize": "step summarize", "chat mock": "skill summarize",
        "step wrap": "workflow report3", "skill wrap": "step wrap",
    }
    named = {s.name: s for s in spans}
    tool = named["execute_tool report3"]
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "report3" and tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.attributes["skillyard.run_id"] == result.run_id and tool.status.status_code == StatusCode.UNSET
    chat = named["chat mock"]
    assert chat.kind == trace.SpanKind.CLIENT and chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "mock" and chat.attributes["gen_ai.usage.output_tokens"] > 0
    assert named["step summarize"].attributes["skillyard.step_id"] == "summarize"
    assert {s.context.trace_id for s in spans} == {tool.context.trace_id}


def test_an_agent_run_is_invoke_agent_with_its_model_requests_and_tool_calls(tmp_path: Path) -> None:
    engine, exporter, _ = traced_engine(tmp_path)
    result = asyncio.run(engine.agent("script").run("count the words"))
    assert result.stop_reason == "answer"
    spans = exporter.get_finished_spans()
    parents = [(s.name, (next(p.name for p in spans if p.context.span_id == s.parent.span_id) if s.parent else None))
               for s in spans]
    assert ("invoke_agent", None) in parents
    assert parents.count(("chat script", "invoke_agent")) == 2  # the two model requests of the agent
    assert ("execute_tool report3", "invoke_agent") in parents and ("chat mock", "skill summarize") in parents
    agent = next(s for s in spans if s.name == "invoke_agent")
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent" and agent.attributes["gen_ai.request.model"] == "script"
    assert agent.attributes["skillyard.stop_reason"] == "answer" and agent.attributes["skillyard.run_id"] == result.run_id
    chats = sorted((s for s in spans if s.name == "chat script"), key=lambda s: s.start_time)
    tool = next(s for s in spans if s.name == "execute_tool report3")
    assert chats[0].end_time <= tool.start_time <= tool.end_time <= chats[1].start_time  # think, act, think
    tree(spans)


def test_an_error_sets_the_status_with_the_error_code_and_no_secret_reaches_a_span(tmp_path: Path) -> None:
    engine, exporter, _ = traced_engine(tmp_path)
    result = asyncio.run(engine.call_tool("login", {"user": "bob", "password": PASSWORD}))
    assert not result.ok
    spans = exporter.get_finished_spans()
    named = {s.name: s for s in spans}
    tool = named["execute_tool login"]
    assert tool.status.status_code == StatusCode.ERROR and tool.status.description == result.error.code
    assert tool.attributes["error.type"] == result.error.code
    assert named["skill check"].status.status_code == StatusCode.ERROR
    assert named["step check"].status.status_code == StatusCode.ERROR
    exported = json.dumps([json.loads(s.to_json()) for s in spans])
    assert PASSWORD not in exported and "hunter2" not in exported


def test_an_unknown_tool_and_a_cancelled_run_leave_no_span_open(tmp_path: Path) -> None:
    engine, exporter, _ = traced_engine(tmp_path)
    result = asyncio.run(engine.call_tool("nope", {}))
    assert result.error is not None and result.error.code == "unknown_tool"
    assert [s.status.description for s in exporter.get_finished_spans()] == ["unknown_tool"]

    async def cancel_mid_call() -> None:
        task = asyncio.ensure_future(engine.agent("script").run("go"))
        await asyncio.sleep(0)
        while not engine.runs:
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    exporter.clear()
    asyncio.run(cancel_mid_call())
    sink = next(listener for listener in engine.live.listeners if isinstance(listener, SpanSink))
    assert sink.open_runs == 0 and any(s.name == "invoke_agent" for s in exporter.get_finished_spans())


def test_the_run_continues_the_current_context(tmp_path: Path) -> None:
    engine, exporter, provider = traced_engine(tmp_path)

    async def inside_a_span() -> str:
        with provider.get_tracer("caller").start_as_current_span("caller") as span:
            await engine.call_tool("report3", {"text": "x"})
            return format(span.get_span_context().span_id, "016x")

    caller_id = asyncio.run(inside_a_span())
    tool = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool report3")
    assert format(tool.parent.span_id, "016x") == caller_id


# ─── the switch ──────────────────────────────────────────────────────────────────────


def test_off_by_default_and_the_standard_variables_win() -> None:
    off = TelemetrySettings()
    assert not resolve(off, {}).traces and not resolve(off, {}).metrics
    assert resolve(off, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}).traces
    assert resolve(off, {"OTEL_TRACES_EXPORTER": "console"}).exporter == "console"
    on = TelemetrySettings(traces=True, endpoint="http://collector:4318/", service_name="yard")
    config = resolve(on, {})
    assert config.traces and config.endpoint == "http://collector:4318/v1/traces" and config.service_name == "yard"
    assert resolve(on, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:1/v1/traces"}).endpoint is None  # the SDK reads it
    assert not resolve(on, {"OTEL_SDK_DISABLED": "true"}).traces
    assert not resolve(on, {"OTEL_TRACES_EXPORTER": "none"}).traces
    assert resolve(on, {"OTEL_SERVICE_NAME": "svc"}).service_name == "svc"
    with pytest.raises(TelemetryUnavailable, match="OTEL_TRACES_EXPORTER='jaeger'"):
        resolve(off, {"OTEL_TRACES_EXPORTER": "jaeger"})


HEAVY = ("opentelemetry.sdk", "opentelemetry.exporter", "prometheus_client", "engine.telemetry.otel",
         "engine.telemetry.metrics", "engine.server.tracing")


@pytest.mark.slow
def test_when_off_the_service_imports_neither_opentelemetry_nor_prometheus(tmp_path: Path) -> None:
    root = write_telemetry_project(tmp_path / "p")
    code = (
        "import sys, asyncio; from engine import Engine; from engine.server import create_app\n"
        f"engine = Engine.from_dir({str(root)!r}); app = create_app(engine)\n"
        "asyncio.run(engine.call_tool('report3', {'text': 'a b'}))\n"
        "print(app.state.observability, len(engine.live.listeners) + len(engine.live.sinks), sorted(m for m in sys.modules if m.startswith(HEAVY)))"
    )
    code = f"HEAVY = {HEAVY!r}\n" + code
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None 0 []"  # (FastAPI itself imports opentelemetry-api when it is installed)


@pytest.mark.slow
def test_traces_on_without_the_sdk_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    root = write_telemetry_project(tmp_path / "p", "telemetry: {traces: true}\n")
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nclass _Block:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith(('opentelemetry.sdk', 'opentelemetry.exporter')): raise ModuleNotFoundError(name, name=name)\n"
        "sys.meta_path.insert(0, _Block())\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(blocker), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-m", "engine.cli.main", "serve", "--dir", str(root), "--port", "0", "--no-store"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert "telemetry.traces in config/engine.yaml" in out.stderr and "pip install 'skillyard[otel]'" in out.stderr

"""Traces from the doors that need a process of their own (issue 30 §4), into a real OTLP/HTTP
receiver on loopback: `run-workflow` sends its whole span tree before the process exits; an
embedder's global tracer provider gets the engine's spans; a `skillyard worker` on a real
Temporal dev server puts its activity spans in the trace of the `skillyard call` that started
the execution. A password planted in the arguments reaches no exported span."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

from telemetry_support import PASSWORD, write_telemetry_project  # noqa: E402
from temporal_server import temporal_address  # noqa: E402,F401 - the session's dev server (a fixture)
from test_telemetry_doors import assert_report3_tree, children  # noqa: E402
from test_telemetry_otlp import OtlpReceiver  # noqa: E402
from test_temporal import Setup, setup, wait_for  # noqa: E402,F401 - fixtures

pytestmark = pytest.mark.slow  # every test here starts a process


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def otel_env(receiver: OtlpReceiver, service: str, base: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (base or os.environ).items() if not k.startswith("OTEL_")}
    return {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": service}


def test_run_workflow_sends_its_span_tree_before_the_process_exits(receiver: OtlpReceiver, tmp_path: Path) -> None:
    root = write_telemetry_project(tmp_path / "p")
    env = {**otel_env(receiver, "yard-cli"), "OTEL_BSP_SCHEDULE_DELAY": "60000"}  # no timer export: only the exit's
    for args, code in ((["report3", "--arg", "text=one two three"], 0),
                       (["login", "--arg", "user=bob", "--arg", f"password={PASSWORD}"], 1)):
        done = subprocess.run([sys.executable, "-c", "import sys; from engine.cli.main import run_workflow_main; "
                               "sys.exit(run_workflow_main())", *args, "--dir", str(root), "--no-store"],
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == code, done.stderr
        assert "Traceback" not in done.stderr and "already shutdown" not in done.stderr, done.stderr
    spans = receiver.spans  # the processes have exited: what is here was sent before they did
    [tool] = [s for s in spans if s["name"] == "execute_tool report3"]
    assert tool["service"] == "yard-cli" and tool["parent"] == ""
    assert_report3_tree(spans, tool)
    [login] = [s for s in spans if s["name"] == "execute_tool login"]
    assert login["attributes"]["error.type"] == "execution_error"
    for body in receiver.bodies:
        assert PASSWORD.encode() not in body and b"hunter2" not in body


def test_an_embedders_global_tracer_provider_gets_the_engines_spans(tmp_path: Path) -> None:
    root = write_telemetry_project(tmp_path / "p")
    code = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter(); provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter)); trace.set_tracer_provider(provider)\n"
        "from engine import Engine\n"
        f"engine = Engine.from_dir({str(root)!r})\n"
        "with trace.get_tracer('app').start_as_current_span('request') as outer:\n"
        "    assert engine.call_tool_sync('report3', {'text': 'a b'}).ok\n"
        "engine.close()\n"
        "tool = next(s for s in exporter.get_finished_spans() if s.name == 'execute_tool report3')\n"
        "print(tool.parent.span_id == outer.get_span_context().span_id, len(exporter.get_finished_spans()))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "10"]  # request, tool, workflow, 3 steps, 3 skills, 1 model request


def test_a_workers_spans_join_the_trace_of_the_call_that_started_the_execution(
        receiver: OtlpReceiver, setup: Setup) -> None:  # noqa: F811
    front_env = otel_env(receiver, "yard-front", setup.env)
    setup.env = {**otel_env(receiver, "yard-worker", setup.env), "OTEL_BSP_SCHEDULE_DELAY": "100"}
    setup.start_worker()
    done = subprocess.run([*setup.command("call", "slowPipeline", "--arg", "text=hello"), "--backend", "temporal"],
                          env=front_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [tool] = [s for s in receiver.spans if s["name"] == "execute_tool slowPipeline"]  # sent as the call exited
    assert tool["service"] == "yard-front"

    def worker_spans() -> list[dict[str, Any]]:
        found = [s for s in receiver.spans if s["service"] == "yard-worker"]
        return found if len(found) >= 3 else []

    activities = wait_for(worker_spans, 30, "the worker's three step activities")
    assert [s["name"] for s in activities] == ["activity skillyard.step"] * 3
    assert all(s["trace_id"] == tool["trace_id"] and s["parent"] == tool["span_id"] for s in activities)
    assert sorted(s["attributes"]["skillyard.step"] for s in activities) == [1, 2, 3]
    assert {s["attributes"]["skillyard.run_id"] for s in activities} == {tool["attributes"]["skillyard.run_id"]}
    front_steps = children(receiver.spans, next(s for s in children(receiver.spans, tool) if s["name"].startswith("workflow")))
    assert [s["name"] for s in front_steps] == ["step count", "step sleep", "step shout"]

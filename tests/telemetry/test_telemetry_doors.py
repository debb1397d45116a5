"""Traces from every door, in process (issue 30 §4): `skillyard call` and `skillyard batch` through
`main(argv)` export to a real OTLP/HTTP receiver on loopback when `OTEL_EXPORTER_OTLP_ENDPOINT`
is set — every span sent before `main` returns; `Engine(…, tracer_provider=…)` puts the spans
of its calls in the given provider. A password planted in the arguments reaches no span.

The doors that need a process of their own (`run-workflow`, a Temporal worker, the
application's global provider) are in test_telemetry_doors_slow.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from engine import Engine  # noqa: E402
from engine.cli.main import main  # noqa: E402
from engine.link.linker import load_project  # noqa: E402
from telemetry_support import PASSWORD, write_telemetry_project  # noqa: E402
from test_telemetry_otlp import OtlpReceiver  # noqa: E402

Span = dict[str, Any]


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """A receiver, and the standard variables that point this process's doors at it."""
    receiver = OtlpReceiver()
    for name in ("OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "yard-door")
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def children(spans: list[Span], parent: Span) -> list[Span]:
    return [s for s in spans if s["parent"] == parent["span_id"] and s["trace_id"] == parent["trace_id"]]


def assert_report3_tree(spans: list[Span], tool: Span) -> None:
    """execute_tool → workflow → its 3 steps → a skill each → the prompt skill's model request."""
    assert tool["name"] == "execute_tool report3" and tool["attributes"]["skillyard.run_id"].startswith("run_")
    [workflow] = children(spans, tool)
    steps = children(spans, workflow)
    assert workflow["name"] == "workflow report3" and [s["name"] for s in steps] == ["step count", "step summarize", "step wrap"]
    skills = [children(spans, step) for step in steps]
    assert [[s["name"] for s in found] for found in skills] == [["skill count"], ["skill summarize"], ["skill wrap"]]
    [chat] = children(spans, skills[1][0])
    assert chat["name"] == "chat mock" and chat["attributes"]["gen_ai.usage.input_tokens"] > 0


def test_skillyard_call_exports_its_spans_before_main_returns(
        receiver: OtlpReceiver, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_telemetry_project(tmp_path / "p")
    assert main(["call", "report3", "--arg", "text=one two three", "--dir", str(root), "--no-store", "--quiet"]) == 0
    assert main(["call", "login", "--arg", "user=bob", "--arg", f"password={PASSWORD}", "--dir", str(root),
                 "--no-store", "--quiet"]) == 1
    spans = receiver.spans  # no waiting: the call's engine sent them as it closed
    [tool] = [s for s in spans if s["name"] == "execute_tool report3"]
    assert tool["parent"] == "" and tool["service"] == "yard-door"  # a trace of its own per call
    assert_report3_tree(spans, tool)
    [login] = [s for s in spans if s["name"] == "execute_tool login"]
    assert login["status_message"] == "execution_error" and login["trace_id"] != tool["trace_id"]
    assert "[REDACTED]" in capsys.readouterr().err  # the error message quoted it: redacted there…
    for body in receiver.bodies:  # …and no span carries it
        assert PASSWORD.encode() not in body and b"hunter2" not in body


def test_a_batch_is_one_trace_per_case_under_a_case_span(
        receiver: OtlpReceiver, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_telemetry_project(tmp_path / "p")
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(json.dumps(case) + "\n" for case in (
        {"id": "a", "arguments": {"text": "one two"}}, {"id": "b", "arguments": {"text": "three"}})))
    out = tmp_path / "results.jsonl"
    assert main(["batch", "report3", "--data", str(data), "--out", str(out), "--dir", str(root), "--no-store"]) == 0
    capsys.readouterr()
    results = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    spans = receiver.spans
    cases = {s["attributes"]["skillyard.case"]: s for s in spans if s["name"].startswith("case ")}
    assert sorted(cases) == ["a", "b"] and cases["a"]["trace_id"] != cases["b"]["trace_id"]
    for case_id, case in cases.items():
        assert case["name"] == f"case {case_id}" and case["parent"] == ""
        assert case["attributes"]["skillyard.batch_id"] == results[case_id]["batch_id"]
        [tool] = children(spans, case)
        assert tool["attributes"]["skillyard.run_id"] == results[case_id]["run_id"]
        assert_report3_tree(spans, tool)


def test_an_engine_given_a_tracer_provider_traces_every_call_into_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")  # the environment turns the engine's own traces off…
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    root = write_telemetry_project(tmp_path / "p")
    engine = Engine(load_project(root), tracer_provider=provider)  # …a provider given in code is used all the same
    assert engine.call_tool_sync("report3", {"text": "a b c"}).ok
    assert not engine.call_tool_sync("login", {"user": "bob", "password": PASSWORD}).ok
    engine.close()
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names.count("execute_tool report3") == 1 and "execute_tool login" in names and "chat mock" in names
    for span in exporter.get_finished_spans():
        assert PASSWORD not in json.dumps(dict(span.attributes or {}), default=str)
        assert PASSWORD not in (span.status.description or "")
    provider.shutdown()


def test_from_project_passes_the_provider_and_off_attaches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    project = load_project(write_telemetry_project(tmp_path / "p"))
    traced = Engine.from_project(project, tracer_provider=provider)
    assert traced.call_tool_sync("report3", {"text": "x"}).ok
    traced.close()
    assert [s.name for s in exporter.get_finished_spans()].count("execute_tool report3") == 1
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    plain = Engine.from_project(project)
    assert plain.traces is None  # off by default: no span listener on the call path
    plain.close()
    provider.shutdown()


def test_skillyard_chat_exports_the_agent_run(receiver: OtlpReceiver, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = write_telemetry_project(tmp_path / "p")
    assert main(["chat", "How many words?", "--model", "script", "--dir", str(root), "--no-store", "--quiet"]) == 0
    assert "three words" in capsys.readouterr().out
    spans = receiver.spans
    [agent] = [s for s in spans if s["name"] == "invoke_agent"]
    assert agent["parent"] == "" and agent["attributes"]["skillyard.stop_reason"]
    assert [s["name"] for s in children(spans, agent)] == ["chat script", "execute_tool report3", "chat script"]
    assert_report3_tree(spans, next(s for s in children(spans, agent) if s["name"] == "execute_tool report3"))

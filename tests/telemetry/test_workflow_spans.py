"""OpenTelemetry spans of forEach items and sub-workflows, with the SDK's in-memory exporter:
each item is its own span (a child of its step's span, with `skillyard.item_index`), its
skill attempts or its sub-workflow below it, and a sub-workflow's span sits under the step
that runs it (without taking the place of the tool's own workflow span)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from engine import Engine  # noqa: E402
from engine.telemetry.otel import SpanSink  # noqa: E402
from test_workflow_items import PER_ITEM, files  # noqa: E402

WORKFLOWS = """
workflows:
  flow:
    steps:
      - id: list
        skill: items
        input: {items: $toolArgs.items}
      - id: each
        skill: work
        forEach: $steps.list.output.items
        concurrency: 3
        onItemError: skip
        input: {key: $item.key, fail: $item.fail, delay: $item.delay}
      - id: loop
        workflow: perItem
        forEach: $steps.list.output.items
        concurrency: 3
        onItemError: skip
        input: {key: $item.key, fail: $item.fail, delay: $item.delay, position: $index}
      - id: nested
        workflow: perItem
        input: {key: 9, delay: 0, fail: false, position: 0}
    output: $steps.nested.output
""" + PER_ITEM


def spans_of(write_yaml_project, items: list[dict[str, Any]]) -> tuple[tuple[ReadableSpan, ...], Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    engine = Engine.from_dir(write_yaml_project(files(WORKFLOWS)))
    engine.subscribe(SpanSink(provider.get_tracer("test"), engine.runs))
    result = engine.call_tool_sync("run", {"items": items})
    return exporter.get_finished_spans(), result


def test_each_for_each_item_is_its_own_span_under_its_step(write_yaml_project) -> None:
    items = [{"key": 0, "delay": 0.03}, {"key": 1, "fail": True}, {"key": 2, "delay": 0.01}]
    spans, result = spans_of(write_yaml_project, items)
    assert result.ok, result.error
    by_id = {s.context.span_id: s for s in spans}

    def parent(span: ReadableSpan) -> ReadableSpan:
        assert span.parent is not None and span.parent.span_id in by_id, f"{span.name}: its parent was not exported"
        outer = by_id[span.parent.span_id]
        assert outer.start_time <= span.start_time and span.end_time <= outer.end_time, f"{span.name} outside {outer.name}"
        return outer

    def named(name: str) -> list[ReadableSpan]:
        return [s for s in spans if s.name == name]

    for span in spans:
        if span.parent is not None:
            parent(span)
    (tool,) = named("execute_tool run")
    (top,) = [s for s in named("workflow flow")]
    assert parent(top) is tool

    # a skill per item: item spans under the step, each item's attempt under its item
    (each,) = named("step each")
    assert parent(each) is top
    each_items = sorted(named("item each #0") + named("item each #1") + named("item each #2"), key=lambda s: s.attributes["skillyard.item_index"])
    assert [s.attributes["skillyard.item_index"] for s in each_items] == [0, 1, 2]
    assert all(parent(s) is each and s.attributes["skillyard.step_id"] == "each" for s in each_items)
    assert each_items[1].status.status_code == StatusCode.ERROR  # the failed (skipped) item
    assert each_items[0].status.status_code == StatusCode.UNSET
    skills = [s for s in named("skill work") if s.attributes["skillyard.step_id"] == "each"]
    assert sorted(s.attributes["skillyard.item_index"] for s in skills) == [0, 1, 2]
    assert all(parent(s) is each_items[s.attributes["skillyard.item_index"]] for s in skills)

    # a sub-workflow per item: item → workflow → steps → skills (and the prompt skill's chat)
    (loop,) = named("step loop")
    loop_items = {s.attributes["skillyard.item_index"]: s for s in spans if s.name.startswith("item loop #")}
    assert sorted(loop_items) == [0, 1, 2] and all(parent(s) is loop for s in loop_items.values())
    sub_flows = [s for s in named("workflow perItem") if "skillyard.item_index" in s.attributes]
    assert sorted(parent(s).name for s in sub_flows) == ["item loop #0", "item loop #1", "item loop #2"]
    inner = [s for s in spans if s.attributes.get("skillyard.step_id") == "loop/do" and s.name == "step loop/do"]
    assert sorted(parent(s).name for s in inner) == ["workflow perItem"] * 3
    assert {parent(parent(s)).attributes["skillyard.item_index"] for s in inner} == {0, 1, 2}
    chats = [s for s in spans if s.name.startswith("chat ") and s.attributes.get("skillyard.step_id") == "loop/say"]
    assert sorted(s.attributes["skillyard.item_index"] for s in chats) == [0, 2]  # item 1 failed before it

    # a plain workflow step: its sub-workflow under the step, the tool's workflow span intact
    (nested,) = named("step nested")
    (sub,) = [s for s in named("workflow perItem") if parent(s) is nested]
    assert parent(nested) is top and "skillyard.item_index" not in sub.attributes
    assert {parent(s).name for s in spans if s.name in ("step nested/do", "step nested/say")} == {"workflow perItem"}

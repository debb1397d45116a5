"""Running when / forEach / parallel / sub-workflows / `??` (issue 14): outputs, events in order,
onItemError modes, and real cancellation of parallel members and in-flight items.

The skills are real python functions in a module written beside the YAML; they record what
happened to them (started, finished, cancelled) in the module's own lists.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import time
from pathlib import Path
from typing import Any

import pytest

from engine import Engine

_names = itertools.count()

MODULE = '''
import asyncio

log = []          # ("start" | "end" | "cancelled", key)
in_flight = [0]
peak = [0]
gate = {}


async def work(input):
    key = input.get("key", input.get("text"))
    log.append(("start", key))
    in_flight[0] += 1
    peak[0] = max(peak[0], in_flight[0])
    try:
        await asyncio.sleep(input.get("delay", 0))
        if input.get("fail"):
            raise ValueError(f"item {key} is broken")
        if input.get("wait_for"):
            gate.setdefault(input["wait_for"], asyncio.Event())
            await gate[input["wait_for"]].wait()
        if input.get("release"):
            gate.setdefault(input["release"], asyncio.Event()).set()
    except asyncio.CancelledError:
        log.append(("cancelled", key))
        raise
    finally:
        in_flight[0] -= 1
    log.append(("end", key))
    return {"text": str(key).upper(), "n": input.get("n", 0)}


def items(input):
    return {"items": input["items"]}
'''

SKILLS = """
skills:
  work:
    kind: python
    function: {module}:work
    input:
      type: object
      properties:
        key: {{}}
        text: {{type: string}}
        delay: {{type: number}}
        fail: {{type: boolean}}
        wait_for: {{type: string}}
        release: {{type: string}}
        n: {{type: integer}}
    output:
      type: object
      properties: {{text: {{type: string}}, n: {{type: integer}}}}
      required: [text, n]
  items:
    kind: python
    function: {module}:items
    input: {{type: object, properties: {{items: {{type: array}}}}, required: [items]}}
    output:
      type: object
      properties:
        items:
          type: array
          items: {{type: object, properties: {{key: {{}}, delay: {{type: number}}, fail: {{type: boolean}}}}}}
      required: [items]
"""

TOOLS = """
tools:
  run:
    description: Run the workflow.
    parameters:
      type: object
      properties:
        items: {type: array, default: []}
        flag: {type: boolean}
        text: {type: string}
      additionalProperties: false
    workflow: flow
"""


def project(write_yaml_project, workflows: str) -> tuple[Engine, Any]:
    module = f"wfrun_skills_{next(_names)}"
    root: Path = write_yaml_project({
        f"{module}.py": MODULE, "skills.yaml": SKILLS.format(module=module), "tools.yaml": TOOLS, "workflows.yaml": workflows,
    })
    engine = Engine.from_dir(root)
    return engine, importlib.import_module(module)


def progress(events: list[Any]) -> list[tuple[str, str | None]]:
    return [(e.data["stage"], e.data.get("step_id")) for e in events if e.type == "tool_progress_delta"]


FOR_EACH = """
workflows:
  flow:
    steps:
      - id: list
        skill: items
        input: {{items: $toolArgs.items}}
      - id: each
        skill: work
        forEach: $steps.list.output.items
        concurrency: {concurrency}
        onItemError: {mode}
        input: {{key: $item.key, delay: $item.delay, fail: $item.fail, n: $index}}
"""


def test_for_each_keeps_input_order_bounds_concurrency_and_reports_items(write_yaml_project) -> None:
    engine, skills = project(write_yaml_project, FOR_EACH.format(concurrency=3, mode="fail"))
    delays = [0.05, 0.01, 0.03, 0.0, 0.02, 0.04, 0.0, 0.01]
    events: list[Any] = []
    result = engine.call_tool_sync("run", {"items": [{"key": i, "delay": d} for i, d in enumerate(delays)]}, on_event=events.append)
    assert result.ok, result.error
    assert result.data == [{"text": str(i), "n": i} for i in range(8)]
    assert skills.peak[0] == 3
    done = [e.data for e in events if e.type == "tool_progress_delta" and e.data["stage"] == "item_finished"]
    assert [d["items_done"] for d in done] == list(range(1, 9))
    assert all(d["items_total"] == 8 and d["step_id"] == "each" for d in done)
    assert sorted(d["item_index"] for d in done) == list(range(8))
    started = next(e.data for e in events if e.type == "tool_progress_delta" and e.data.get("stage") == "step_started" and e.data["step_id"] == "each")
    assert started["items_total"] == 8
    item_events = [e for e in events if e.type in ("skill_start", "skill_result") and e.step_id == "each"]
    assert len(item_events) == 16
    for index in range(8):
        mine = [e.type for e in item_events if e.data["item_index"] == index]
        assert mine == ["skill_start", "skill_result"]


def test_for_each_fail_cancels_the_items_in_flight(write_yaml_project) -> None:
    engine, skills = project(write_yaml_project, FOR_EACH.format(concurrency=3, mode="fail"))
    items = [{"key": 0, "delay": 5}, {"key": 1, "delay": 5}, {"key": 2, "delay": 0.02, "fail": True}, {"key": 3}, {"key": 4}]
    result = engine.call_tool_sync("run", {"items": items})
    assert not result.ok
    assert result.error.code == "execution_error"
    assert "item 2" in result.error.message and "item 2 is broken" in result.error.message
    assert ("cancelled", 0) in skills.log and ("cancelled", 1) in skills.log
    assert ("start", 3) not in skills.log and ("start", 4) not in skills.log  # never started
    assert skills.in_flight[0] == 0


def test_for_each_skip_leaves_failed_items_out(write_yaml_project) -> None:
    engine, _ = project(write_yaml_project, FOR_EACH.format(concurrency=2, mode="skip"))
    result = engine.call_tool_sync("run", {"items": [{"key": "a"}, {"key": "b", "fail": True}, {"key": "c"}]})
    assert result.ok
    assert result.data == [{"text": "A", "n": 0}, {"text": "C", "n": 2}]


def test_for_each_collect_wraps_every_item(write_yaml_project) -> None:
    engine, _ = project(write_yaml_project, FOR_EACH.format(concurrency=1, mode="collect"))
    events: list[Any] = []
    result = engine.call_tool_sync("run", {"items": [{"key": "a"}, {"key": "b", "fail": True}]}, on_event=events.append)
    assert result.ok
    assert result.data[0] == {"ok": True, "output": {"text": "A", "n": 0}}
    assert result.data[1]["ok"] is False
    assert result.data[1]["error"]["code"] == "execution_error"
    assert "item b is broken" in result.data[1]["error"]["message"]
    errors = [e for e in events if e.type == "skill_error"]
    assert [e.data["item_index"] for e in errors] == [1]


def test_for_each_over_an_empty_array(write_yaml_project) -> None:
    engine, skills = project(write_yaml_project, FOR_EACH.format(concurrency=4, mode="fail"))
    result = engine.call_tool_sync("run", {"items": []})
    assert result.ok and result.data == []
    assert skills.log == []


PARALLEL = """
workflows:
  flow:
    steps:
      - parallel:
          - id: left
            skill: work
            input: {key: left, wait_for: right-started, delay: 0}
          - id: right
            skill: work
            input: {key: right, release: right-started, delay: 0.01}
      - id: after
        skill: work
        input: {text: $steps.left.output.text}
    output: {left: $steps.left.output, right: $steps.right.output, after: $steps.after.output}
"""


def test_parallel_members_run_at_the_same_time_and_interleave(write_yaml_project) -> None:
    engine, skills = project(write_yaml_project, PARALLEL)
    events: list[Any] = []
    result = engine.call_tool_sync("run", {}, on_event=events.append)
    assert result.ok, result.error
    # left waited for right to start: only possible when both run at once
    assert result.data == {"left": {"text": "LEFT", "n": 0}, "right": {"text": "RIGHT", "n": 0}, "after": {"text": "LEFT", "n": 0}}
    assert skills.log[:2] == [("start", "left"), ("start", "right")]
    starts = [(e.type, e.step_id) for e in events if e.type in ("skill_start", "skill_result")]
    assert starts[:2] == [("skill_start", "left"), ("skill_start", "right")]
    assert progress(events) == [
        ("matched", None), ("prepared", None),
        ("step_started", "left"), ("step_started", "right"),
        ("step_finished", "right"), ("step_finished", "left"),
        ("step_started", "after"), ("step_finished", "after"),
        ("done", None),
    ]


PARALLEL_FAIL = """
workflows:
  flow:
    steps:
      - parallel:
          - id: slow
            skill: work
            input: {key: slow, delay: 5}
          - id: broken
            skill: work
            retry: {times: 2, delay: 10ms}
            input: {key: broken, delay: 0.01, fail: true}
      - id: after
        skill: work
        input: {key: after}
    output: $steps.after.output
"""


def test_a_failing_member_cancels_the_others_after_its_own_retries(write_yaml_project) -> None:
    engine, skills = project(write_yaml_project, PARALLEL_FAIL)
    events: list[Any] = []
    result = engine.call_tool_sync("run", {}, on_event=events.append)
    assert not result.ok
    assert "item broken is broken" in result.error.message
    assert [e.data["attempt"] for e in events if e.type == "skill_error"] == [1, 2, 3]
    assert ("cancelled", "slow") in skills.log
    assert ("start", "after") not in skills.log
    assert ("step_cancelled", "slow") in progress(events)


RETRIED = """
workflows:
  flow:
    steps:
      - id: broken
        skill: work
        retry: {times: 3, delay: 30ms}
        input: {key: broken, fail: true}
"""


def test_the_waits_between_attempts_start_at_the_delay_and_double(write_yaml_project) -> None:
    engine, _ = project(write_yaml_project, RETRIED)
    starts: list[float] = []
    events: list[Any] = []

    def heard(event: Any) -> None:
        events.append(event)
        if event.type == "skill_start":
            starts.append(time.perf_counter())

    result = engine.call_tool_sync("run", {}, on_event=heard)
    assert not result.ok and "item broken is broken" in result.error.message
    errors = [e.data for e in events if e.type == "skill_error"]
    assert [(e["attempt"], e["will_retry"]) for e in errors] == [(1, True), (2, True), (3, True), (4, False)]
    waits = [later - earlier for earlier, later in zip(starts, starts[1:], strict=False)]
    for waited, delay in zip(waits, (0.03, 0.06, 0.12), strict=True):
        assert waited >= delay * 0.9, (waits, delay)  # (the loop may fire a timer a clock tick early)


def test_cancelling_the_call_cancels_parallel_members_and_items(write_yaml_project) -> None:
    workflows = """
    workflows:
      flow:
        steps:
          - id: list
            skill: items
            input: {items: $toolArgs.items}
          - parallel:
              - id: each
                skill: work
                forEach: $steps.list.output.items
                concurrency: 2
                input: {key: $item.key, delay: 5}
              - id: other
                skill: work
                input: {key: other, delay: 5}
        output: $steps.other.output
    """
    engine, skills = project(write_yaml_project, workflows)

    async def scenario() -> None:
        call = asyncio.create_task(engine.call_tool("run", {"items": [{"key": i} for i in range(5)]}))
        for _ in range(200):
            await asyncio.sleep(0.005)
            if skills.in_flight[0] == 3:
                break
        assert skills.in_flight[0] == 3  # two items and the other member
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(scenario())
    assert sorted(str(key) for what, key in skills.log if what == "cancelled") == ["0", "1", "other"]
    assert skills.in_flight[0] == 0
    assert ("start", 2) not in skills.log


WHEN = """
workflows:
  flow:
    steps:
      - id: maybe
        skill: work
        when: $toolArgs.flag == true and not exists($toolArgs.text)
        input: {key: maybe}
      - id: after
        skill: work
        input: {text: $steps.maybe.output.text ?? "fallback"}
    output: {maybe: $steps.maybe.output, after: $steps.after.output.text}
"""


def test_when_false_skips_the_step_and_says_why(write_yaml_project) -> None:
    engine, skills = project(write_yaml_project, WHEN)
    events: list[Any] = []
    result = engine.call_tool_sync("run", {"flag": False}, on_event=events.append)
    assert result.ok, result.error
    assert result.data == {"after": "FALLBACK"}  # the skipped step's output is absent
    assert ("start", "maybe") not in skills.log
    skipped = [e.data for e in events if e.type == "tool_progress_delta" and e.data["stage"] == "step_skipped"]
    assert skipped == [{"stage": "step_skipped", "message": "step 1 of 2 skipped: maybe (when: $toolArgs.flag == true and not exists($toolArgs.text))",
                        "step": 1, "of": 2, "step_id": "maybe", "condition": "$toolArgs.flag == true and not exists($toolArgs.text)"}]
    assert progress(events) == [("matched", None), ("prepared", None), ("step_skipped", "maybe"), ("step_started", "after"), ("step_finished", "after"), ("done", None)]


def test_when_true_runs_the_step(write_yaml_project) -> None:
    engine, _ = project(write_yaml_project, WHEN)
    result = engine.call_tool_sync("run", {"flag": True})
    assert result.data == {"maybe": {"text": "MAYBE", "n": 0}, "after": "MAYBE"}
    assert engine.call_tool_sync("run", {"flag": True, "text": "x"}).data == {"after": "FALLBACK"}


def test_for_each_with_a_per_item_when(write_yaml_project) -> None:
    workflows = """
    workflows:
      flow:
        steps:
          - id: list
            skill: items
            input: {items: $toolArgs.items}
          - id: each
            skill: work
            forEach: $steps.list.output.items
            when: $index != 1 and $item.key in ["a", "b", "c"]
            input: {key: $item.key, n: $index}
    """
    engine, _ = project(write_yaml_project, workflows)
    result = engine.call_tool_sync("run", {"items": [{"key": "a"}, {"key": "b"}, {"key": "c"}, {"key": "d"}]})
    assert result.data == [{"text": "A", "n": 0}, {"text": "C", "n": 2}]


def test_sub_workflow_sees_the_mapped_input_as_tool_args(write_yaml_project) -> None:
    workflows = """
    workflows:
      flow:
        steps:
          - id: first
            skill: work
            input: {key: outer}
          - id: nested
            workflow: inner
            input: {word: $steps.first.output.text}
          - id: last
            skill: work
            input: {text: $steps.nested.output.text}
      inner:
        steps:
          - id: first
            skill: work
            input: {text: $toolArgs.word}
    """
    engine, _ = project(write_yaml_project, workflows)
    events: list[Any] = []
    result = engine.call_tool_sync("run", {}, on_event=events.append)
    assert result.ok, result.error
    assert result.data == {"text": "OUTER", "n": 0}
    steps = [e.step_id for e in events if e.type == "skill_start"]
    assert steps == ["first", "nested/first", "last"]
    assert ("prepared", None) in progress(events) and ("step_started", "nested") in progress(events)


def test_for_each_with_a_whole_step_when_is_skipped_not_emptied(write_yaml_project) -> None:
    workflows = """
    workflows:
      flow:
        steps:
          - id: list
            skill: items
            input: {items: $toolArgs.items}
          - id: each
            skill: work
            forEach: $steps.list.output.items
            when: $toolArgs.flag == true
            input: {key: $item.key}
          - id: after
            skill: work
            input: {text: '$steps.each.output[0].text ?? "skipped"'}
        output: $steps.after.output.text
    """
    engine, skills = project(write_yaml_project, workflows)
    events: list[Any] = []
    result = engine.call_tool_sync("run", {"items": [{"key": "a"}], "flag": False}, on_event=events.append)
    assert result.data == "SKIPPED"
    assert ("step_skipped", "each") in progress(events)
    assert ("start", "a") not in skills.log
    assert engine.call_tool_sync("run", {"items": [{"key": "a"}], "flag": True}).data == "A"

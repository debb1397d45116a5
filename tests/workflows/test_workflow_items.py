"""forEach items and sub-workflows (issue 14, second pass): a forEach step that runs a whole
workflow per item, `item_index` on every event an item produces, "step k of N" numbered the
same way in every event, a workflow step's step_started naming its workflow, and the shipped
triage report's grammar.

The skills are real python functions in a module written beside the YAML (they record what
happened to them), plus a prompt skill answered by the offline `mock` provider.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
from pathlib import Path
from typing import Any

import pytest

import engine as engine_module
from engine import ConfigError, Engine

_names = itertools.count()

MODULE = '''
import asyncio

log = []
in_flight = [0]
peak = [0]


async def work(input, ctx):
    key = input["key"]
    ctx.progress(f"working on {key}", stage="working", key=key)
    log.append(("start", key))
    in_flight[0] += 1
    peak[0] = max(peak[0], in_flight[0])
    try:
        await asyncio.sleep(input.get("delay", 0))
        if input.get("fail"):
            raise ValueError(f"item {key} is broken")
    except asyncio.CancelledError:
        log.append(("cancelled", key))
        raise
    finally:
        in_flight[0] -= 1
    log.append(("end", key))
    return {"text": str(key).upper()}


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
      properties: {{key: {{}}, delay: {{type: number}}, fail: {{type: boolean}}}}
      required: [key]
    output: {{type: object, properties: {{text: {{type: string}}}}, required: [text]}}
  say:
    kind: prompt
    user: "Say {{{{ text }}}} back."
    input: {{type: object, properties: {{text: {{type: string}}}}, required: [text]}}
  items:
    kind: python
    function: {module}:items
    input: {{type: object, properties: {{items: {{type: array}}}}, required: [items]}}
    output:
      type: object
      properties:
        items:
          type: array
          items:
            type: object
            properties: {{key: {{type: integer}}, delay: {{type: number}}, fail: {{type: boolean}}}}
            required: [key]
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
        flag: {type: boolean, default: false}
      additionalProperties: false
    workflow: flow
"""

MODELS = "default: mock\nmodels:\n  mock: {provider: mock}\n"

PER_ITEM = """
  perItem:
    steps:
      - id: do
        skill: work
        input: {key: $toolArgs.key, delay: $toolArgs.delay, fail: $toolArgs.fail}
      - id: say
        skill: say
        input: {text: $steps.do.output.text}
    output: {text: $steps.do.output.text, position: $toolArgs.position, said: $steps.say.output}
"""

EACH_WORKFLOW = """
workflows:
  flow:
    steps:
      - id: list
        skill: items
        input: {{items: $toolArgs.items}}
      - id: each
        workflow: perItem
        forEach: $steps.list.output.items
        concurrency: {concurrency}
        onItemError: {mode}
        input: {{key: $item.key, delay: $item.delay, fail: $item.fail, position: $index}}
""" + PER_ITEM.replace("{", "{{").replace("}", "}}")


def files(workflows: str) -> dict[str, str]:
    module = f"wfitems_skills_{next(_names)}"
    return {f"{module}.py": MODULE, "skills.yaml": SKILLS.format(module=module), "tools.yaml": TOOLS,
            "workflows.yaml": workflows, "config/models.yaml": MODELS}


def project(write_yaml_project, workflows: str) -> tuple[Engine, Any]:
    written = files(workflows)
    engine = Engine.from_dir(write_yaml_project(written))
    module = next(name for name in written if name.startswith("wfitems_skills_")).removesuffix(".py")
    return engine, importlib.import_module(module)


def stages(events: list[Any]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == "tool_progress_delta"]


# ─── forEach over a sub-workflow ──────────────────────────────────────────────────────


def test_for_each_runs_a_sub_workflow_per_item_in_input_order(write_yaml_project) -> None:
    engine, skills = project(write_yaml_project, EACH_WORKFLOW.format(concurrency=3, mode="fail"))
    delays = [0.04, 0.0, 0.02, 0.01, 0.03, 0.0]
    events: list[Any] = []
    result = engine.call_tool_sync("run", {"items": [{"key": i, "delay": d} for i, d in enumerate(delays)]},
                                   on_event=events.append)
    assert result.ok, result.error
    assert [(o["text"], o["position"]) for o in result.data] == [(str(i), i) for i in range(6)]
    assert all(isinstance(o["said"], str) and o["said"] for o in result.data)
    assert skills.peak[0] == 3
    assert result.metadata["usage"]["input_tokens"] > 0  # the items' model usage adds up on the call

    started = next(d for d in stages(events) if d["stage"] == "step_started" and d["step_id"] == "each")
    assert started["workflow"] == "perItem" and started["items_total"] == 6
    done = [d for d in stages(events) if d["stage"] == "item_finished"]
    assert sorted(d["item_index"] for d in done) == list(range(6)) and [d["items_done"] for d in done] == list(range(1, 7))
    # each item's sub-workflow: its own prepared → steps → done, all marked with the item
    for index in range(6):
        mine = [e for e in events if e.data.get("item_index") == index and not e.data.get("stage") == "item_finished"]
        assert [e.data["stage"] for e in mine if e.type == "tool_progress_delta"] == [
            "prepared", "step_started", "step_finished", "step_started", "step_finished", "done"]
        assert all(d["step_id"] == "each" for d in (mine[0].data, mine[-1].data))
        start = next(e for e in mine if e.type == "skill_start" and e.step_id == "each/do")
        assert start.data["input"]["key"] == index


def test_every_event_of_an_item_carries_its_index(write_yaml_project) -> None:
    engine, _ = project(write_yaml_project, EACH_WORKFLOW.format(concurrency=2, mode="fail"))
    events: list[Any] = []
    result = engine.call_tool_sync("run", {"items": [{"key": i} for i in range(3)]}, on_event=events.append)
    assert result.ok, result.error
    inside = [e for e in events if (e.step_id or "").startswith("each/")]
    kinds = {e.type for e in inside}
    assert {"skill_start", "skill_result", "skill_progress_delta", "model_exchange"} <= kinds
    missing = [(e.type, e.step_id, e.data.get("message")) for e in inside if "item_index" not in e.data]
    assert missing == []
    progress = [e for e in inside if e.type == "skill_progress_delta" and e.data.get("stage") == "working"]
    assert sorted((e.data["key"], e.data["item_index"]) for e in progress) == [(0, 0), (1, 1), (2, 2)]


def test_every_event_of_a_skill_item_carries_its_index(write_yaml_project) -> None:
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
            input: {key: $item.key}
          - id: said
            skill: say
            forEach: $steps.each.output
            input: {text: $item.text}
    """
    engine, _ = project(write_yaml_project, workflows)
    events: list[Any] = []
    result = engine.call_tool_sync("run", {"items": [{"key": i} for i in range(3)]}, on_event=events.append)
    assert result.ok, result.error
    items = [e for e in events if e.step_id in ("each", "said")]
    assert {"skill_start", "skill_result", "skill_progress_delta", "model_exchange"} <= {e.type for e in items}
    assert [(e.type, e.step_id) for e in items if "item_index" not in e.data] == []
    exchanges = sorted(e.data["item_index"] for e in items if e.type == "model_exchange")
    assert exchanges == [0, 1, 2]


def test_for_each_sub_workflow_fail_cancels_the_items_in_flight(write_yaml_project) -> None:
    engine, skills = project(write_yaml_project, EACH_WORKFLOW.format(concurrency=3, mode="fail"))
    items = [{"key": 0, "delay": 5}, {"key": 1, "delay": 5}, {"key": 2, "delay": 0.02, "fail": True}, {"key": 3}, {"key": 4}]
    result = engine.call_tool_sync("run", {"items": items})
    assert not result.ok
    assert "item 2" in result.error.message and "item 2 is broken" in result.error.message
    assert result.error.details["item_index"] == 2
    assert ("cancelled", 0) in skills.log and ("cancelled", 1) in skills.log
    assert ("start", 3) not in skills.log and ("start", 4) not in skills.log
    assert skills.in_flight[0] == 0


@pytest.mark.parametrize("mode", ["skip", "collect"])
def test_for_each_sub_workflow_skip_and_collect(write_yaml_project, mode: str) -> None:
    engine, _ = project(write_yaml_project, EACH_WORKFLOW.format(concurrency=2, mode=mode))
    result = engine.call_tool_sync("run", {"items": [{"key": 0}, {"key": 1, "fail": True}, {"key": 2}]})
    assert result.ok, result.error
    if mode == "skip":
        assert [o["text"] for o in result.data] == ["0", "2"]
    else:
        assert [o["ok"] for o in result.data] == [True, False, True]
        assert result.data[0]["output"]["text"] == "0"
        assert result.data[1]["error"]["code"] == "execution_error"
        assert "item 1 is broken" in result.data[1]["error"]["message"]


def test_cancelling_the_call_cancels_sub_workflow_items(write_yaml_project) -> None:
    engine, skills = project(write_yaml_project, EACH_WORKFLOW.format(concurrency=2, mode="fail"))

    async def scenario() -> None:
        call = asyncio.create_task(engine.call_tool("run", {"items": [{"key": i, "delay": 5} for i in range(4)]}))
        for _ in range(400):
            await asyncio.sleep(0.005)
            if skills.in_flight[0] == 2:
                break
        assert skills.in_flight[0] == 2
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(scenario())
    assert sorted(key for what, key in skills.log if what == "cancelled") == [0, 1]
    assert skills.in_flight[0] == 0 and ("start", 2) not in skills.log


def test_a_for_each_sub_workflow_is_type_checked_at_load(write_yaml_project) -> None:
    workflows = """
    workflows:
      flow:
        steps:
          - id: list
            skill: items
            input: {items: $toolArgs.items}
          - id: each
            workflow: perItem
            forEach: $steps.list.output.items
            input: {key: $item.key, position: $index}
          - id: after
            skill: work
            input:
              key: $steps.each.output[0].nope
      perItem:
        steps:
          - id: do
            skill: work
            input: {key: $toolArgs.key, delay: $toolArgs.wait}
        output: {text: $steps.do.output.text, position: $toolArgs.position}
    """
    with pytest.raises(ConfigError) as caught:
        engine_module.load_project(write_yaml_project(files(workflows)))
    found = {(str(i.location), i.message) for i in caught.value.issues}
    assert ("workflows.yaml:19:44", "$toolArgs.wait: step 'each' of workflow 'flow' maps no input 'wait' into this workflow") in found, found
    assert any(where == "workflows.yaml:14:16" and "'[0].nope'" in message and "workflow 'perItem', for each item" in message
               for where, message in found), found
    assert len(found) == 2, found


# ─── numbering and naming ─────────────────────────────────────────────────────────────


NUMBERED = """
workflows:
  flow:
    steps:
      - id: list
        skill: items
        input: {items: $toolArgs.items}
      - id: each
        skill: work
        forEach: $steps.list.output.items
        input: {key: $item.key}
      - parallel:
          - id: side
            skill: work
            input: {key: side}
          - id: nested
            workflow: perItem
            when: $toolArgs.flag == true
            input: {key: nested, delay: 0, fail: false, position: 0}
      - id: after
        skill: work
        input: {key: after}
    output: $steps.after.output
""" + PER_ITEM


@pytest.mark.parametrize("flag", [False, True])
def test_steps_are_numbered_k_of_n_the_same_in_every_event(write_yaml_project, flag: bool) -> None:
    engine, _ = project(write_yaml_project, NUMBERED)
    events: list[Any] = []
    result = engine.call_tool_sync("run", {"items": [{"key": 1}], "flag": flag}, on_event=events.append)
    assert result.ok, result.error
    numbered = [d for d in stages(events) if "of" in d and "/" not in d["step_id"]]
    expected = {"list": 1, "each": 2, "side": 3, "nested": 4, "after": 5}
    assert {d["step_id"] for d in numbered} == set(expected)
    for data in numbered:
        assert (data["step"], data["of"]) == (expected[data["step_id"]], 5), data
        assert f"step {expected[data['step_id']]} of 5 " in data["message"], data
    assert next(d for d in stages(events) if d["stage"] == "prepared")["steps"] == 5


def test_a_workflow_step_names_the_workflow_it_runs(write_yaml_project) -> None:
    engine, _ = project(write_yaml_project, NUMBERED)
    events: list[Any] = []
    assert engine.call_tool_sync("run", {"flag": True}, on_event=events.append).ok
    started = next(d for d in stages(events) if d["stage"] == "step_started" and d["step_id"] == "nested")
    assert started["workflow"] == "perItem"
    assert started["message"] == "step 4 of 5 started: nested (workflow perItem)"
    prepared = [d for d in stages(events) if d["stage"] == "prepared"]
    assert [(d["workflow"], d.get("step_id")) for d in prepared] == [("flow", None), ("perItem", "nested")]


# ─── the shipped example ──────────────────────────────────────────────────────────────


def test_the_shipped_triage_report_says_1_bug_not_1_bugs() -> None:
    shipped = Engine.from_dir(Path(__file__).resolve().parents[2])
    one = shipped.call_tool_sync("triageFeedback", {"text": "The app crashes on upload. Love the dark mode! How do I export?"})
    assert one.ok, one.error
    assert "3 items: 1 bug, 1 question, 1 praise." in one.data
    two = shipped.call_tool_sync("triageFeedback", {"text": "The app crashes on upload. Saving is broken.", "includeBugs": False})
    assert "2 items: 2 bugs, 0 questions, 0 praise." in two.data
    single = shipped.call_tool_sync("triageFeedback", {"text": "How do I export?"})
    assert "1 item: 0 bugs, 1 question, 0 praise." in single.data

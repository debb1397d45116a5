"""The CLI timeline of workflows beyond a straight line: items collapsed past 10, skipped
steps with their condition, parallel members marked, sub-workflow steps named."""

from __future__ import annotations

import io

from engine import Engine
from engine.cli.timeline import ITEMS_SHOWN, Timeline

MODULE = '''
def make(input):
    return [{"n": k} for k in range(input["count"])]


def double(input):
    if input["n"] == 17:
        raise ValueError("seventeen")
    return {"n": input["n"] * 2}
'''

SKILLS = """
skills:
  make:
    kind: python
    function: wftimeline_skills:make
    input: {type: object, properties: {count: {type: integer}}, required: [count]}
    output: {type: array, items: {type: object, properties: {n: {type: integer}}, required: [n]}}
  double:
    kind: python
    function: wftimeline_skills:double
    input: {type: object, properties: {n: {type: integer}}, required: [n]}
    output: {type: object, properties: {n: {type: integer}}, required: [n]}
"""

TOOLS = """
tools:
  run:
    description: Run it.
    parameters: {type: object, properties: {count: {type: integer}}, required: [count]}
    workflow: flow
"""

WORKFLOWS = """
workflows:
  flow:
    steps:
      - id: make
        skill: make
        input: {count: $toolArgs.count}
      - id: each
        skill: double
        forEach: $steps.make.output
        onItemError: skip
        input: {n: $item.n}
      - parallel:
          - id: left
            skill: double
            input: {n: 1}
          - id: never
            skill: double
            when: len($steps.each.output) > 1000
            input: {n: 2}
          - id: sub
            workflow: inner
            input: {n: 3}
      - id: last
        skill: double
        input: {n: $steps.left.output.n}
  inner:
    steps:
      - id: one
        skill: double
        input: {n: $toolArgs.n}
"""


def test_timeline_of_every_construct(write_yaml_project) -> None:
    root = write_yaml_project({"wftimeline_skills.py": MODULE, "skills.yaml": SKILLS, "tools.yaml": TOOLS, "workflows.yaml": WORKFLOWS})
    stream = io.StringIO()
    result = Engine.from_dir(root).call_tool_sync("run", {"count": 25}, on_event=Timeline(stream, live=False))
    assert result.ok, result.error
    lines = stream.getvalue().splitlines()
    item_lines = [line for line in lines if "each #" in line]
    shown = {int(line.split("#")[1].split()[0].rstrip(":")) for line in item_lines}
    assert shown == set(range(ITEMS_SHOWN)) | {17}  # the first ten, and the failed one
    assert "  ▶ [2/6] each: 25 items" in lines
    assert any(line.startswith("  ✗ each #17: execution_error: skill 'double' raised ValueError: seventeen") for line in lines)
    assert any(line.startswith("  ✓ each: 25 items ") and line.endswith("(items 10–24 not shown one by one)") for line in lines)
    assert "  ○ ∥ never skipped: `when: len($steps.each.output) > 1000` did not hold" in lines
    assert "  ▶ [3/6] ∥ left → double [python]" in lines
    assert "  ▶ [5/6] ∥ sub → workflow inner" in lines
    assert "  ▶ [1/1] sub/one → double [python]" in lines
    assert len(lines) < 45


EACH_WORKFLOW = """
workflows:
  flow:
    steps:
      - id: make
        skill: make
        input: {count: $toolArgs.count}
      - id: each
        workflow: inner
        forEach: $steps.make.output
        onItemError: skip
        input: {n: $item.n}
    output: $steps.each.output
  inner:
    steps:
      - id: one
        skill: double
        input: {n: $toolArgs.n}
      - id: two
        skill: double
        input: {n: $steps.one.output.n}
"""


def test_timeline_of_a_sub_workflow_per_item_leaves_out_every_event_of_the_later_items(write_yaml_project) -> None:
    root = write_yaml_project({"wftimeline_skills.py": MODULE, "skills.yaml": SKILLS, "tools.yaml": TOOLS,
                               "workflows.yaml": EACH_WORKFLOW})
    engine = Engine.from_dir(root)
    stream = io.StringIO()
    result = engine.call_tool_sync("run", {"count": 20}, on_event=Timeline(stream, live=False))
    assert result.ok, result.error
    lines = stream.getvalue().splitlines()
    numbered = [line for line in lines if "#" in line]
    shown = {int(line.split("#")[1].split()[0].rstrip(":")) for line in numbered}
    assert shown == set(range(ITEMS_SHOWN)) | {17}  # item 17 fails (skill 'double' refuses 17)
    assert "  ▶ [1/2] each/one #3 → double [python]" in lines and "  ✓ each/two #3  " in "\n".join(lines)
    assert sum("prepared" in line for line in lines) == 1, lines  # only the tool's own workflow says it
    assert any(line.startswith("  ✓ each: 20 items ") for line in lines)
    assert len(lines) < 60, "\n".join(lines)
    one = io.StringIO()
    assert engine.call_tool_sync("run", {"count": 1}, on_event=Timeline(one, live=False)).ok
    assert "  ▶ [2/2] each: 1 item" in one.getvalue().splitlines()

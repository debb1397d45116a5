"""Load-time checks of when / forEach / parallel / sub-workflows / `??` (issue 14), each at its
exact `file:line:col` with a fix, all at once; plus strict booleans and reference-like literals.

Each project is shown inline: line 1 is the line after the opening quotes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import engine
from engine import ConfigError, ConfigIssue

TOOLS = """
tools:
  triage:
    description: Triage some text.
    parameters:
      type: object
      properties:
        text: {type: string}
        flag: {type: boolean}
        limit: {type: integer}
      required: [text]
    workflow: flow
"""

SKILLS = """
skills:
  split:
    kind: template
    input: {type: object, properties: {text: {type: string}}, required: [text]}
    output:
      type: object
      properties:
        items: {type: array, items: {type: object, properties: {text: {type: string}}, required: [text]}}
        count: {type: integer}
      required: [items, count]
    template: '{"items": [{"text": {{ text | tojson }}}], "count": 1}'
  shout:
    kind: template
    input: {type: object, properties: {text: {type: string}, n: {type: integer}}, required: [text]}
    template: "{{ text }}!"
  join:
    kind: template
    input: {type: object, properties: {items: {type: array}}, required: [items]}
    template: "{{ items | length }}"
"""


def issues_of(write_yaml_project, workflows: str, tools: str = TOOLS, skills: str = SKILLS) -> list[ConfigIssue]:
    root = write_yaml_project({"tools.yaml": tools, "skills.yaml": skills, "workflows.yaml": workflows})
    with pytest.raises(ConfigError) as caught:
        engine.load_project(root)
    for issue in caught.value.issues:
        assert issue.hint, f"every issue says what to do: {issue}"
    return caught.value.issues


def only(write_yaml_project, workflows: str, **files: str) -> ConfigIssue:
    issues = issues_of(write_yaml_project, workflows, **files)
    assert len(issues) == 1, "\n".join(map(str, issues))
    return issues[0]


def loads(write_yaml_project, workflows: str, tools: str = TOOLS, skills: str = SKILLS) -> engine.Project:
    return engine.load_project(write_yaml_project({"tools.yaml": tools, "skills.yaml": skills, "workflows.yaml": workflows}))


def test_every_construct_loads_when_right(write_yaml_project) -> None:
    project = loads(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: s
                skill: split
                input: {text: $toolArgs.text}
              - id: each
                skill: shout
                forEach: $steps.s.output.items
                when: $item.text != "" and $index >= 0
                input: {text: $item.text, n: $index}
              - parallel:
                  - id: a
                    skill: shout
                    when: $toolArgs.flag == true and len($steps.each.output) > 0
                    input: {text: $toolArgs.text}
                  - id: b
                    workflow: sub
                    input: {words: $steps.s.output.items}
              - id: c
                skill: shout
                input: {text: $steps.a.output ?? "none"}
              - id: d
                skill: join
                input: {items: $steps.each.output}  # a per-item `when` filters items: never absent
          sub:
            steps:
              - id: x
                skill: shout
                input: {text: "$toolArgs.words[0].text"}
    """)
    assert "triage" in project.tools


def test_for_each_over_a_non_array(write_yaml_project) -> None:
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: s
                skill: split
                input: {text: $toolArgs.text}
              - id: each
                skill: shout
                forEach: $steps.s.output.count
                input: {text: x}
    """)
    assert str(issue.location) == "workflows.yaml:9:18"
    assert "$steps.s.output.count, which is an integer, not an array" in issue.message
    assert "array" in issue.hint


def test_item_outside_for_each(write_yaml_project) -> None:
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: one
                skill: shout
                input: {text: $item.text}
    """)
    assert str(issue.location) == "workflows.yaml:6:23"
    assert "$item.text is used outside a forEach step" in issue.message
    assert "forEach" in issue.hint


def test_item_path_checked_against_the_items_schema(write_yaml_project) -> None:
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: s
                skill: split
                input: {text: $toolArgs.text}
              - id: each
                skill: shout
                forEach: $steps.s.output.items
                input:
                  text: $item.txt
    """)
    assert str(issue.location) == "workflows.yaml:11:17"
    assert "$item.txt: the forEach item has no 'txt'" in issue.message


def test_parallel_member_reading_a_sibling(write_yaml_project) -> None:
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - parallel:
                  - id: a
                    skill: shout
                    input: {text: $toolArgs.text}
                  - id: b
                    skill: shout
                    input: {text: $steps.a.output}
              - id: c
                skill: shout
                input: {text: $steps.b.output}
    """)
    assert str(issue.location) == "workflows.yaml:10:27"
    assert "runs at the same time as step 'b'" in issue.message
    assert "move step 'b' after the group" in issue.hint


def test_maybe_absent_output_into_a_required_input_needs_a_fallback(write_yaml_project) -> None:
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: a
                skill: shout
                when: $toolArgs.flag == true
                input: {text: $toolArgs.text}
              - id: b
                skill: shout
                input: {text: $steps.a.output}
    """)
    assert str(issue.location) == "workflows.yaml:10:23"
    assert "may be absent (step 'a' runs only when $toolArgs.flag == true)" in issue.message
    assert "$steps.a.output ?? <value>" in issue.hint


def test_fallback_literal_must_fit_the_target(write_yaml_project) -> None:
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: a
                skill: shout
                when: $toolArgs.flag == true
                input: {text: $toolArgs.text}
              - id: b
                skill: shout
                input: {text: $steps.a.output ?? 3}
    """)
    assert str(issue.location) == "workflows.yaml:10:23"
    assert "the fallback 3" in issue.message


def test_when_comparing_a_string_with_a_number(write_yaml_project) -> None:
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: s
                skill: split
                input: {text: $toolArgs.text}
              - id: b
                skill: shout
                when: $steps.s.output.count > "3"
                input: {text: x}
    """)
    assert str(issue.location) == "workflows.yaml:9:15"
    assert 'when of step \'b\': $steps.s.output.count > "3" orders a number against a string' in issue.message
    assert "numbers with numbers" in issue.hint


def test_when_type_error_against_the_tool_parameters(write_yaml_project) -> None:
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: b
                skill: shout
                when: $toolArgs.limit == "ten"
                input: {text: x}
    """)
    assert str(issue.location) == "workflows.yaml:6:15"
    assert "compares a number with a string" in issue.message


def test_when_syntax_and_unknown_step(write_yaml_project) -> None:
    issues = issues_of(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: a
                skill: shout
                when: $toolArgs.flag = true
                input: {text: x}
              - id: b
                skill: shout
                when: exists($steps.nope.output)
                input: {text: x}
    """)
    assert [str(i.location) for i in issues] == ["workflows.yaml:6:15", "workflows.yaml:10:15"]
    assert "cannot read the condition of step 'a'" in issues[0].message
    assert "workflow 'flow' has no step with that id" in issues[1].message


def test_sub_workflow_recursion_direct_and_indirect(write_yaml_project) -> None:
    issues = issues_of(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: a
                workflow: flow
          one:
            steps:
              - id: x
                workflow: two
          two:
            steps:
              - id: y
                workflow: one
    """)
    located = {str(i.location): i.message for i in issues}
    assert "makes workflow 'flow' run itself (flow → flow)" in located["workflows.yaml:5:19"]
    assert any("one → two → one" in m or "two → one → two" in m for m in located.values())
    assert all("directly or through others" in i.hint for i in issues)


def test_sub_workflow_input_checked_against_the_calling_mapping(write_yaml_project) -> None:
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: a
                workflow: sub
                input: {words: $toolArgs.text}
          sub:
            steps:
              - id: x
                skill: shout
                input: {text: $toolArgs.missing}
    """)
    assert str(issue.location) == "workflows.yaml:11:23"
    assert "step 'a' of workflow 'flow' maps no input 'missing'" in issue.message


def test_sub_workflow_output_type_flows_on(write_yaml_project) -> None:
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: a
                workflow: sub
                input: {text: $toolArgs.text}
              - id: b
                skill: shout
                input: {text: $steps.a.output.items}
          sub:
            steps:
              - id: x
                skill: split
                input: {text: $toolArgs.text}
    """)
    assert str(issue.location) == "workflows.yaml:9:23"
    assert "$steps.a.output.items is an array, but input 'text' expects a string" in issue.message


def test_shapes_unknown_workflow_concurrency_without_for_each_and_a_final_group(write_yaml_project) -> None:
    issues = issues_of(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: a
                workflow: nope
              - id: b
                skill: shout
                concurrency: 3
                input: {text: x}
              - parallel:
                  - id: c
                    skill: shout
                    input: {text: x}
    """)
    assert [str(i.location) for i in issues] == ["workflows.yaml:5:19", "workflows.yaml:8:22", "workflows.yaml:11:11"]
    assert "runs unknown workflow 'nope'" in issues[0].message
    assert "concurrency applies to forEach steps only" in issues[1].message
    assert "ends with a parallel group" in issues[2].message


def test_all_errors_at_once(write_yaml_project) -> None:
    issues = issues_of(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: a
                skill: shout
                forEach: $toolArgs.text
                input: {text: $item}
              - id: b
                skill: shout
                input: {text: $item.text}
              - id: c
                skill: shout
                when: len(3) > 1
                input: {text: x}
    """)
    assert [str(i.location) for i in issues] == ["workflows.yaml:6:18", "workflows.yaml:10:23", "workflows.yaml:13:15"]
    assert "forEach reads $toolArgs.text, which is a string, not an array" in issues[0].message
    assert "$item.text is used outside a forEach step" in issues[1].message
    assert "len() of a number" in issues[2].message


def test_string_booleans_are_refused(write_yaml_project) -> None:
    tools = TOOLS.replace("    workflow: flow", '    enabled: "yes"\n    workflow: flow')
    issue = only(write_yaml_project, """
        workflows:
          flow:
            steps:
              - {id: a, skill: shout, input: {text: x}}
    """, tools=tools)
    assert str(issue.location) == "tools.yaml:11:14"
    assert "enabled" in issue.message and "valid boolean" in issue.message
    assert "without quotes" in issue.hint


def test_a_reference_without_dollar_is_a_warning(write_yaml_project) -> None:
    project = loads(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: s
                skill: split
                input: {text: toolArgs.text}
              - id: b
                skill: shout
                input:
                  text: steps.s.output.items
    """)
    warnings = [str(w) for w in project.warnings]
    assert warnings == [
        "workflows.yaml:6:23: 'toolArgs.text' is a literal string that looks like a reference — write $toolArgs.text to read the value",
        "workflows.yaml:10:17: 'steps.s.output.items' is a literal string that looks like a reference — write $steps.s.output.items to read the value",
    ]


def test_shipped_triage_example_loads() -> None:
    project = engine.load_project(Path(__file__).resolve().parents[2])
    assert "triageFeedback" in project.tools
    assert project.warnings == []


def test_what_a_step_runs(write_yaml_project) -> None:
    issues = issues_of(write_yaml_project, """
        workflows:
          flow:
            steps:
              - id: both
                skill: shout
                workflow: sub
                input: {text: x}
              - id: neither
                input: {text: x}
              - id: mapped
                workflow: sub
                forEach: $toolArgs.text
                retry: 2
          sub:
            steps:
              - {id: x, skill: shout, input: {text: x}}
    """)
    found = [(str(i.location), i.message) for i in issues]
    for expected in [
        ("workflows.yaml:6:19", "step 'both' has both `skill:` and `workflow:`"),
        ("workflows.yaml:8:13", "step 'neither' says neither which skill nor which workflow it runs"),
        ("workflows.yaml:13:16", "step 'mapped' runs a workflow, which has no retry of its own"),
    ]:
        assert expected in found, found
    # a workflow step may have forEach; it is checked as any forEach is (here: over a string)
    assert any(where == "workflows.yaml:12:18" and "not an array" in message for where, message in found), found

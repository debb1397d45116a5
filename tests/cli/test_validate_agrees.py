"""What `skillyard validate` reports stops the tool everywhere, and only the root problem is
reported (issue 30 §5): an undeclared template variable breaks its tool at load for `call`
as for `validate`; a broken skill feeding a `forEach` is not followed by a `$item … outside a
forEach step` that sends the user to the wrong place."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine import Engine
from engine.cli.main import main
from engine.link.linker import load_project

UNDECLARED = {
    "tools.yaml": """\
tools:
  report:
    description: Report
    workflow: report
    parameters:
      type: object
      properties: {text: {type: string}}
      required: [text]
  other:
    description: Other
    workflow: other
    parameters:
      type: object
      properties: {text: {type: string}}
      required: [text]
""",
    "skills.yaml": """\
skills:
  render:
    kind: template
    template: "{{ intro }}: {{ text }}"
    input:
      type: object
      properties: {text: {type: string}}
      required: [text]
  echo:
    kind: template
    template: "{{ text }}"
    input:
      type: object
      properties: {text: {type: string}}
      required: [text]
""",
    "workflows.yaml": """\
workflows:
  report:
    steps:
      - id: first
        skill: echo
        input: {text: $toolArgs.text}
      - id: render
        skill: render
        input: {text: $steps.first.output}
  other:
    steps:
      - id: only
        skill: echo
        input: {text: $toolArgs.text}
""",
}

BROKEN_FEEDER = {
    "tools.yaml": """\
tools:
  pages:
    description: Pages
    workflow: pages
    parameters:
      type: object
      properties: {urls: {type: array, items: {type: string}}}
      required: [urls]
""",
    "skills.yaml": """\
skills:
  fetchAll:
    kind: python
    function: no_such_module_for_this_test:fetch
    input:
      type: object
      properties: {urls: {type: array, items: {type: string}}}
    output:
      type: object
      properties: {pages: {type: array, items: {type: object, properties: {content: {type: string}}}}}
  summarize:
    kind: template
    template: "{{ text }}"
    input:
      type: object
      properties: {text: {type: string}}
      required: [text]
""",
    "workflows.yaml": """\
workflows:
  pages:
    steps:
      - id: fetch
        skill: fetchAll
        input: {urls: $toolArgs.urls}
      - id: each
        skill: summarize
        forEach: $steps.fetch.output.pages
        input: {text: $item.content}
""",
}

MESSAGE = "uses {{ intro }}, which the skill's input schema does not declare"


def write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config").mkdir(exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def test_validate_and_call_refuse_an_undeclared_template_variable_alike(tmp_path, capsys):
    root = write(tmp_path / "p", UNDECLARED)
    assert main(["validate", str(root)]) == 2
    validated = capsys.readouterr().err
    assert MESSAGE in validated
    assert main(["call", "report", "--dir", str(root), "--arg", "text=hi", "--no-store"]) == 2
    called = capsys.readouterr()
    assert MESSAGE in called.err and "skills.yaml:4:19" in called.err
    assert "is undefined" not in called.err and called.out == "" and "Traceback" not in called.err
    assert main(["call", "other", "--dir", str(root), "--arg", "text=hi", "--no-store", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == '"hi"'


def test_a_linked_tool_with_a_problem_in_its_parts_is_broken_for_every_door(tmp_path):
    project = load_project(write(tmp_path / "p", UNDECLARED), isolate_broken_tools=True)
    assert "report" not in project.tools and "other" in project.tools
    (problem,) = project.broken["report"]
    assert MESSAGE in problem.message and problem.location.file == "skills.yaml"
    result = asyncio.run(Engine.from_project(project).call_tool("report", {"text": "hi"}))
    assert result.error is not None and result.error.code == "config_error"
    assert MESSAGE in result.error.details["problems"][0]


def test_a_broken_skill_feeding_a_for_each_is_the_only_problem_reported(tmp_path, capsys):
    root = write(tmp_path / "p", BROKEN_FEEDER)
    assert main(["validate", str(root)]) == 2
    err = capsys.readouterr().err
    assert "cannot import module 'no_such_module_for_this_test'" in err
    assert "outside a forEach" not in err and "1 problem found" in err


def test_a_for_each_that_is_no_reference_is_reported_once(tmp_path, capsys):
    files = dict(BROKEN_FEEDER)
    files["skills.yaml"] = files["skills.yaml"].replace("no_such_module_for_this_test:fetch", "os.path:join")
    files["workflows.yaml"] = files["workflows.yaml"].replace("forEach: $steps.fetch.output.pages", "forEach: steps.fetch.output.pages")
    root = write(tmp_path / "p", files)
    assert main(["validate", str(root)]) == 2
    err = capsys.readouterr().err
    assert "not a reference to an array" in err and "outside a forEach" not in err and "1 problem found" in err

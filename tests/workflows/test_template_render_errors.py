"""A template that fails while rendering says where (issue 30 §5): the skill, the template's
file:line:col and its template line, and a `did you mean` from the input schema."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine import Engine
from engine.cli.main import main

TOOLS = """\
tools:
  rep:
    description: R
    workflow: rep
    parameters:
      type: object
      properties: {summary: {type: string}}
      required: [summary]
"""
SKILLS = """\
skills:
  render:
    kind: {kind}
    {field}: |
      # Report
      {{{{ report.sumary }}}}
    input:
      type: object
      properties:
        report:
          type: object
          properties: {{summary: {{type: string}}}}
"""
WORKFLOWS = """\
workflows:
  rep:
    steps:
      - id: r
        skill: render
        input: {report: {summary: $toolArgs.summary}}
"""


def project(root: Path, kind: str, field: str) -> Path:
    (root / "config").mkdir(parents=True)
    (root / "tools.yaml").write_text(TOOLS)
    (root / "skills.yaml").write_text(SKILLS.format(kind=kind, field=field))
    (root / "workflows.yaml").write_text(WORKFLOWS)
    return root


def test_a_template_skill_render_error_names_skill_place_and_the_close_name(tmp_path, capsys):
    root = project(tmp_path / "p", "template", "template")
    assert main(["call", "rep", "--dir", str(root), "--arg", "summary=x", "--no-store", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert ("template skill 'render' failed to render: 'dict object' has no attribute 'sumary' "
            "(skills.yaml:6:7, template line 2); did you mean `summary`?") in err, err
    assert "Traceback" not in err


def test_a_prompt_skill_render_error_says_the_same(tmp_path):
    root = project(tmp_path / "p", "prompt", "user")
    result = asyncio.run(Engine.from_dir(root).call_tool("rep", {"summary": "x"}))
    assert result.error is not None and result.error.code == "execution_error"
    assert result.error.message.endswith(
        "prompt of skill 'render' failed to render: 'dict object' has no attribute 'sumary' "
        "(skills.yaml:6:7, template line 2); did you mean `summary`?"), result.error.message

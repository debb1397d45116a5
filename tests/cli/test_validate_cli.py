"""`skillyard validate` and `run-workflow` on real files, as real subprocesses.

Config errors: every issue as a `file:line:col: what — what to do` line on stderr, exit 2,
nothing on stdout, never a traceback. A good project: a one-line `ok: …` summary, exit 0.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process or a server

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ISSUE_LINE = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?P<col>\d+): (?P<message>.+) — (?P<hint>.+)$")


def _command(script: str) -> list[str]:
    """The installed console script when it sits beside this interpreter, else its entry point."""
    installed = BIN / script
    if installed.is_file():
        return [str(installed)]
    entry = {"skillyard": "main", "run-workflow": "run_workflow_main"}[script]
    return [sys.executable, "-c", f"import sys; from engine.cli.main import {entry}; sys.exit({entry}())"]


def run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_command(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


BAD_PROJECT = {
    "tools.yaml": """
        tools:
          echo:
            desciption: Echo a text.
            parameters:
              type: object
              properties:
                text: {type: strng}
              required: [text]
            workflow: echoFlow
        """,
    "skills/shout.yaml": """
        skills:
          shout:
            kind: template
            input: {type: object, properties: {text: {type: string}}, required: [text]}
            template: |
              Shout:
              {{ text }}
              {% if %}
        """,
    "workflows.yaml": """
        workflows:
          echoFlow:
            steps:
              - id: one
                skill: shout
                input: {text: $steps.two.output}
              - id: two
                skill: shuot
                input: {}
        """,
}

EXPECTED_ISSUES = {
    ("skills/shout.yaml", 8, 7): "template syntax error",
    ("tools.yaml", 3, 5): "unknown field 'desciption'",
    ("workflows.yaml", 6, 23): "reads step 'two', which runs later",
    ("workflows.yaml", 8, 16): "unknown skill 'shuot'",
}


def _assert_reports_every_issue(result: subprocess.CompletedProcess[str], stopped: str = "the project does not load") -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == f"{len(lines) - 1} problems found; {stopped}."
    found = {}
    for line in lines[:-1]:
        match = ISSUE_LINE.match(line)
        assert match, f"not a `file:line:col: message — hint` line: {line!r}"
        found[(match["file"], int(match["line"]), int(match["col"]))] = match["message"]
    for where, phrase in EXPECTED_ISSUES.items():
        assert where in found, f"missing {where} in:\n{result.stderr}"
        assert phrase in found[where]


def test_validate_bad_project_prints_every_issue_and_exits_2(write_yaml_project) -> None:
    root = write_yaml_project(BAD_PROJECT)
    _assert_reports_every_issue(run("skillyard", "validate", str(root), cwd=root.parent))


def test_run_workflow_on_a_bad_project_exits_2_with_the_issues(write_yaml_project) -> None:
    root = write_yaml_project(BAD_PROJECT)
    result = run("run-workflow", "echo", "--arg", "text=hi", "--dir", str(root), cwd=root.parent)
    _assert_reports_every_issue(result, "nothing was run")


def test_validate_repo_root_prints_one_ok_line() -> None:
    result = run("skillyard", "validate", str(ROOT), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ok: "), result.stdout
    assert re.search(r"\d+ tools?\b", lines[0]) and re.search(r"\d+ skills?\b", lines[0])


def test_validate_hostile_yaml_from_the_current_directory(write_yaml_project) -> None:
    # one subprocess, three hostile files: each is a clean, positioned error
    root = write_yaml_project({
        "tools.yaml": "tools:\n  x: !!python/object/apply:os.system ['echo pwned']\n",
        "skills.yaml": "skills: " + "[" * 10_000 + "]" * 10_000 + "\n",
        "workflows.yaml": b"workflows:\n  x: caf\xe9\n",
    })
    result = run("skillyard", "validate", cwd=root)  # DIR defaults to the current directory
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "pwned" not in result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert lines[-1] == "3 problems found; the project does not load."
    # the column depends on the libyaml build: its scanner may stop a deep flow first (libyaml ≥ 0.2.5)
    assert lines[0].startswith("skills.yaml:1:") and ": nesting is deeper than 64 levels — " in lines[0]
    assert lines[1].startswith("tools.yaml:2:6: YAML tag !!python/object/apply:os.system is not allowed — ")
    assert lines[2].startswith("workflows.yaml:2:9: file is not valid UTF-8 (byte 0xe9 at offset 19) — ")

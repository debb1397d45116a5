"""`skillyard runs show` of a workflow beyond a straight line, end to end: the run is recorded
by `skillyard call` into the project's SQLite run store and shown by `skillyard runs show`,
both real subprocesses. Skipped steps say their condition, parallel members are marked, a
sub-workflow step names its workflow, and 1,000 forEach items collapse past the first 10 into
one counting line with the failures listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store_support import cli

pytestmark = pytest.mark.slow  # every test here starts a process or a server

MODULE = '''
def make(input):
    return [{"n": k} for k in range(input["count"])]


def double(input):
    if input["n"] % 200 == 17:
        raise ValueError(f"{input['n']} is unlucky")
    return {"n": input["n"] * 2}
'''

SKILLS = """
skills:
  make:
    kind: python
    function: wfshow_skills:make
    input: {type: object, properties: {count: {type: integer}}, required: [count]}
    output: {type: array, items: {type: object, properties: {n: {type: integer}}, required: [n]}}
  double:
    kind: python
    function: wfshow_skills:double
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
        concurrency: 50
        onItemError: skip
        input: {n: $item.n}
      - parallel:
          - id: left
            skill: double
            input: {n: 1}
          - id: never
            skill: double
            when: len($steps.each.output) > 5000
            input: {n: 2}
          - id: sub
            workflow: inner
            input: {n: 3}
    output: {left: $steps.left.output, sub: $steps.sub.output}
  inner:
    steps:
      - id: one
        skill: double
        input: {n: $toolArgs.n}
"""


def test_runs_show_renders_items_parallel_members_skips_and_sub_workflows(write_yaml_project) -> None:
    root: Path = write_yaml_project({"wfshow_skills.py": MODULE, "skills.yaml": SKILLS, "tools.yaml": TOOLS,
                                     "workflows.yaml": WORKFLOWS})
    where = ("--dir", str(root))
    call = cli("skillyard", "call", "run", "--args-json", '{"count": 1000}', "--quiet", *where, cwd=root)
    assert call.returncode == 0, call.stderr
    assert (root / ".skillyard" / "runs.db").exists()
    listing = cli("skillyard", "runs", "--json", *where, cwd=root)
    assert listing.returncode == 0, listing.stderr
    (run,) = json.loads(listing.stdout)

    show = cli("skillyard", "runs", "show", run["id"], *where, cwd=root)
    assert show.returncode == 0, show.stderr
    lines = show.stdout.splitlines()
    text = show.stdout
    assert "  │  ├─ step each: for each of 1000 items" in lines
    shown = sorted(int(line.split("#")[1].split()[0]) for line in lines if "step each #" in line)
    assert shown == list(range(10))  # the first ten items one by one …
    assert "  │  │    … 990 more items: 985 ok, 5 failed" in lines  # … then one line for the rest
    failures = [line for line in lines if "✗ #" in line]
    assert failures == [f"  │  │      ✗ #{n} each: execution_error: skill 'double' raised ValueError: {n} is unlucky"
                        for n in (17, 217, 417, 617, 817)]
    assert any(line.startswith("  │  │    ✓ each: 1000 items in ") for line in lines)
    assert "  │  ├─ ∥ step left → double [python]" in lines
    assert "  │  ○ ∥ step never skipped: `when: len($steps.each.output) > 5000` did not hold" in lines
    assert "  │  ├─ ∥ step sub → workflow inner" in lines
    assert "  │  ├─ step sub/one → double [python]" in lines
    assert len(lines) < 70, text

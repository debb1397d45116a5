"""A small project for the telemetry tests: a 3-step workflow (python → prompt on the mock
model → template), a tool whose skill fails and takes a password, and a scripted agent model."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

PASSWORD = "hunter2-Sw0rdfish-planted"

_TOOLS = """
tools:
  report3:
    description: Count, summarise and render a text.
    parameters:
      type: object
      properties: {text: {type: string, minLength: 1}}
      required: [text]
      additionalProperties: false
    workflow: report3
  login:
    description: Log in somewhere (always fails).
    parameters:
      type: object
      properties: {user: {type: string}, password: {type: string}}
      required: [user, password]
      additionalProperties: false
    workflow: login
  nap:
    description: Wait a while.
    parameters:
      type: object
      properties: {seconds: {type: number, maximum: 5}}
      required: [seconds]
    workflow: nap
"""

_SKILLS = """
skills:
  count:
    kind: python
    function: telemetry_skills:count
    input: {type: object, properties: {text: {type: string}}, required: [text]}
    output: {type: object, properties: {words: {type: integer}}, required: [words]}
  summarize:
    kind: prompt
    user: "Summarise a text of {{ words }} words."
    input: {type: object, properties: {words: {type: integer}}, required: [words]}
  wrap:
    kind: template
    input: {type: object, properties: {summary: {type: string}}, required: [summary]}
    template: "Summary: {{ summary }}"
  check:
    kind: python
    function: telemetry_skills:check
    input: {type: object, properties: {user: {type: string}, password: {type: string}}}
  nap:
    kind: python
    function: telemetry_skills:nap
    input: {type: object, properties: {seconds: {type: number}}, required: [seconds]}
"""

_WORKFLOWS = """
workflows:
  report3:
    steps:
      - {id: count, skill: count, input: {text: $toolArgs.text}}
      - {id: summarize, skill: summarize, input: {words: $steps.count.output.words}}
      - {id: wrap, skill: wrap, input: {summary: $steps.summarize.output}}
    output: $steps.wrap.output
  login:
    steps:
      - {id: check, skill: check, input: {user: $toolArgs.user, password: $toolArgs.password}}
  nap:
    steps:
      - {id: nap, skill: nap, input: {seconds: $toolArgs.seconds}}
"""

_PY = '''
import asyncio


async def nap(input, ctx):
    await asyncio.sleep(input["seconds"])
    return {"slept": input["seconds"]}

def count(input, ctx):
    return {"words": len(input["text"].split())}


def check(input, ctx):
    raise RuntimeError("login refused for " + input["user"] + " with " + input["password"])
'''

_SCRIPT = {"turns": [
    {"text": "Let me count.", "tool_calls": [{"name": "report3", "arguments": {"text": "one two three"}}]},
    {"text": "It has three words."},
]}


def write_telemetry_project(root: Path, engine_yaml: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tools.yaml").write_text(textwrap.dedent(_TOOLS))
    (root / "skills.yaml").write_text(textwrap.dedent(_SKILLS))
    (root / "workflows.yaml").write_text(textwrap.dedent(_WORKFLOWS))
    (root / "telemetry_skills.py").write_text(textwrap.dedent(_PY))
    (root / "config").mkdir(exist_ok=True)
    models = {"default": "mock", "models": {"mock": {"provider": "mock"},
                                            "script": {"provider": "scripted", "options": {"script": "script.json"}}}}
    (root / "config" / "models.yaml").write_text(json.dumps(models))
    (root / "script.json").write_text(json.dumps(_SCRIPT))
    if engine_yaml:
        (root / "config" / "engine.yaml").write_text(textwrap.dedent(engine_yaml))
    return root

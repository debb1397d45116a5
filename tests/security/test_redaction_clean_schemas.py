"""Skipping the redaction walk is only allowed when a schema proves no sensitive key can appear."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine import Engine
from engine.safety.redaction import Redactor

CLOSED = {"type": "object", "properties": {"x": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}, "additionalProperties": False}


@pytest.mark.parametrize(
    "schema, clean",
    [
        (CLOSED, True),
        ({"type": "string"}, True),
        ({"enum": ["a", "b"]}, True),
        ({**CLOSED, "additionalProperties": True}, False),  # open: anything may arrive
        ({"type": "object", "properties": {"x": {"type": "integer"}}}, False),  # open by default
        ({"type": "object", "properties": {"password": {"type": "string"}}, "additionalProperties": False}, False),
        ({"type": "object", "properties": {"inner": {"type": "object"}}, "additionalProperties": False}, False),
        ({"anyOf": [{"type": "string"}, {"type": "object"}]}, False),
        ({"$ref": "#/$defs/x"}, False),
        ({"type": "array", "items": {"type": "object"}}, False),
        ({}, False),
    ],
)
def test_schema_is_clean(schema: dict, clean: bool) -> None:
    assert Redactor().schema_is_clean(schema) is clean


def test_known_secrets_are_still_scrubbed_from_clean_data() -> None:
    scrubber = Redactor().for_run()
    scrubber({"password": "hunter2-secret"})  # seen once under a sensitive key
    assert scrubber.known_secrets({"note": "typed hunter2-secret twice"}) == {"note": "typed [REDACTED] twice"}


# ─── the flags a project derives, and what events show with them ───────────────────────

_SKILL_MODULE = '''
def upper(input):
    return {"text": input["name"].upper()}
'''

_PROJECT = {
    "tools.yaml": """
        tools:
          closed:
            description: Closed parameters, output mapped under a harmless key.
            parameters: {type: object, properties: {name: {type: string}}, required: [name], additionalProperties: false}
            workflow: harmless
          leaky:
            description: The same data, but the workflow's output puts it under a sensitive key.
            parameters: {type: object, properties: {name: {type: string}}, required: [name], additionalProperties: false}
            workflow: leaky
          open:
            description: Open parameters.
            parameters: {type: object, properties: {name: {type: string}}, required: [name]}
            workflow: harmless
        """,
    "skills.yaml": """
        skills:
          upper:
            kind: python
            function: clean_flags_skills:upper
            input: {type: object, properties: {name: {type: string}}, required: [name], additionalProperties: false}
            output: {type: object, properties: {text: {type: string}}, required: [text], additionalProperties: false}
        """,
    "workflows.yaml": """
        workflows:
          harmless:
            steps: [{id: a, skill: upper, input: {name: $toolArgs.name}}]
            output: {summary: $steps.a.output.text, echo: [$toolArgs.name, "literal"]}
          leaky:
            steps: [{id: a, skill: upper, input: {name: $toolArgs.name}}]
            output: {api_token: $steps.a.output.text}
        """,
    "clean_flags_skills.py": _SKILL_MODULE,
}


def _events(engine: Any, tool: str, args: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    seen: list[Any] = []
    result = asyncio.run(engine.call_tool(tool, args, on_event=seen.append))
    return result, {event.type: event.data for event in seen}


def test_project_marks_which_tools_can_skip_the_walk(write_yaml_project: Any) -> None:
    tools = Engine.from_dir(write_yaml_project(_PROJECT)).project.tools
    assert (tools["closed"].arguments_clean, tools["closed"].result_clean) == (True, True)
    assert (tools["leaky"].arguments_clean, tools["leaky"].result_clean) == (True, False)  # a sensitive literal key
    assert (tools["open"].arguments_clean, tools["open"].result_clean) == (False, False)  # $toolArgs is open


def test_a_sensitive_output_key_is_still_redacted(write_yaml_project: Any) -> None:
    result, data = _events(Engine.from_dir(write_yaml_project(_PROJECT)), "leaky", {"name": "abc"})
    assert result.ok and result.data == {"api_token": "ABC"}  # the caller gets its data
    assert data["tool_call_result"]["data"] == {"api_token": "[REDACTED]"}  # listeners do not


def test_arguments_that_break_a_closed_schema_are_walked(write_yaml_project: Any) -> None:
    result, data = _events(Engine.from_dir(write_yaml_project(_PROJECT)), "closed", {"name": "x", "password": "hunter22"})
    assert result.error is not None and result.error.code == "invalid_arguments"
    assert data["tool_call_start"]["arguments"] == {"name": "x", "password": "[REDACTED]"}


def test_a_sensitive_envelope_word_turns_every_shortcut_off(write_yaml_project: Any) -> None:
    files = dict(_PROJECT)
    files["config/engine.yaml"] = "redaction: {sensitive_keys: [password, data]}\n"
    engine = Engine.from_dir(write_yaml_project(files))
    assert not any(t.arguments_clean or t.result_clean for t in engine.project.tools.values())
    assert not any(s.input_clean or s.output_clean for s in engine.project.skills.values())
    _, data = _events(engine, "closed", {"name": "x"})
    assert data["tool_call_result"]["data"] == "[REDACTED]"


_TEXT_PROJECT = {
    "tools.yaml": """
        tools:
          greet:
            description: Greet a user by a rendered line.
            parameters:
              type: object
              properties: {user: {type: string}, password: {type: string}}
              required: [user, password]
              additionalProperties: false
            workflow: greet
        """,
    "workflows.yaml": """
        workflows:
          greet:
            steps:
              - {id: line, skill: line, input: {user: $toolArgs.user, password: $toolArgs.password}}
            output: {text: $steps.line.output}
        """,
    "skills.yaml": """
        skills:
          line:
            kind: template
            input:
              type: object
              properties: {user: {type: string}, password: {type: string}}
              required: [user, password]
              additionalProperties: false
            template: "hello {{ user }}, your password is {{ password }}"
        """,
}


def test_a_template_s_text_skips_the_key_walk_but_not_the_run_s_secrets(write_yaml_project: Any) -> None:
    """Text from a template (or prompt) skill without an output schema has no keys: clean. A
    value the run learnt is secret is still replaced in it."""
    engine = Engine.from_dir(write_yaml_project(_TEXT_PROJECT))
    assert engine.project.skills["line"].output_clean and engine.project.tools["greet"].result_clean
    result, data = _events(engine, "greet", {"user": "ann", "password": "s3cret-planted-91"})
    assert result.ok and result.data == {"text": "hello ann, your password is s3cret-planted-91"}
    assert data["skill_result"]["output"] == "hello ann, your password is [REDACTED]"
    assert data["tool_call_result"]["data"] == {"text": "hello ann, your password is [REDACTED]"}

"""Issue 10 §14: regexes both validators read (or a load error), and local `$ref`s as RFC 6901
and Draft 2020-12 define them.

A `pattern` jsonschema-rs compiles but Python's `re` does not (`\\p{Letter}`) used to load, and
the first non-matching value then failed the call with `execution_error` ("bad escape \\p"):
now it is a config error at its `file:line:col`, naming the construct and the fix.
"""

from __future__ import annotations

import asyncio
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest

import engine
from engine import ConfigError
from engine.lang.schema import CompiledSchema, schema_problems

SKILLS = """
skills:
  echo:
    kind: template
    input: {type: object, properties: {text: {}}}
    template: "{{ text }}"
"""
WORKFLOWS = """
workflows:
  echoFlow:
    steps:
      - {id: echo, skill: echo, input: {text: $toolArgs}}
"""


def write(tmp_path: Path, parameters: str) -> Path:
    """A project with one tool `echo` whose `parameters:` block is `parameters` (YAML, indented 6)."""
    tools = "tools:\n  echo:\n    description: Echo.\n    workflow: echoFlow\n    parameters:\n" + textwrap.indent(
        textwrap.dedent(parameters).strip("\n"), "      ") + "\n"
    for name, text in {"tools.yaml": tools, "skills.yaml": SKILLS, "workflows.yaml": WORKFLOWS}.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return tmp_path


def load_issues(root: Path) -> list[Any]:
    with pytest.raises(ConfigError) as caught:
        engine.load_project(root)
    return caught.value.issues


def call(root: Path, args: Any) -> Any:
    eng = engine.Engine.from_dir(root)
    try:
        return asyncio.run(eng.call_tool("echo", args))
    finally:
        eng.close()


# ─── patterns ───────────────────────────────────────────────────────────────────────────


def test_a_property_ecma_262_does_not_know_is_a_load_error_at_its_line(tmp_path: Path) -> None:
    """`\\p{Letter}` loads since issue 30 (tests/lang/test_schema_unicode_properties.py); `\\p{Greek}`,
    which jsonschema-rs reads and ECMA-262 does not, is still refused."""
    root = write(tmp_path, """
        type: object
        properties:
          name: {type: string, pattern: "^\\\\p{Greek}+$"}
    """)
    (issue,) = load_issues(root)
    assert str(issue.location) == "tools.yaml:8:39"
    assert "'^\\\\p{Greek}+$'" in issue.message and "\\p{…}" in issue.message
    assert "\\p{Script=Greek}" in issue.message  # the construct and a fix


def test_pattern_property_keys_are_checked_too(tmp_path: Path) -> None:
    root = write(tmp_path, """
        type: object
        patternProperties:
          "^\\\\p{Greek}": {type: string}
    """)
    (issue,) = load_issues(root)
    assert str(issue.location).startswith("tools.yaml:8:")
    assert "\\p{…}" in issue.message


@pytest.mark.parametrize("pattern, construct", [
    ("^a\\Z", "\\Z is Python syntax"),  # Python only
    ("a{,3}", "write {0,n}"),  # Python only
    ("\\pL", "write \\p{L}"),  # jsonschema-rs only
])
def test_one_sided_regexes_name_the_construct(pattern: str, construct: str) -> None:
    (problem,) = schema_problems({"type": "string", "pattern": pattern})
    assert "both validators" in problem and construct in problem


@pytest.mark.parametrize("pattern, construct", [
    ("^\\1(a)$", "back-references"), ("(a)\\1", "back-references"),
    ("(?=(a+)+$)b", "look-arounds"), ("(?<=a)b", "look-arounds"), ("a(?!b)", "look-arounds"),
])
def test_what_would_backtrack_is_refused_at_load_naming_the_construct(pattern: str, construct: str) -> None:
    """Every pattern runs on a linear-time engine: what only a backtracking engine reads is a
    problem of the schema, named, instead of a pattern a caller's text could make slow."""
    (problem,) = schema_problems({"type": "string", "pattern": pattern})
    assert "linear time" in problem and construct in problem, problem


def test_regex_both_validators_read_still_loads_and_refuses_a_bad_value(tmp_path: Path) -> None:
    root = write(tmp_path, """
        type: object
        properties:
          code: {type: string, pattern: "^[A-Z]{2}-[0-9]+$"}
    """)
    result = call(root, {"code": "nope"})
    assert result.ok is False and result.error.code == "invalid_arguments"
    assert "/code" in result.model_text()


def test_reference_validator_exceptions_become_violations() -> None:
    """Reached only by a schema that skipped link (Python API); never an exception from check."""
    compiled = CompiledSchema({"type": "number", "multipleOf": 0.5})  # jsonschema cannot divide infinity
    (violation,) = compiled.check(math.inf)
    assert violation.keyword == "schema" and "does not match the schema" in violation.message
    assert "OverflowError" in violation.message


def test_a_pattern_only_jsonschema_rs_reads_is_explained_by_it() -> None:
    """Explanations match regexes with jsonschema-rs, the engine of the verdict: a pattern neither
    Python's `re` nor regress reads (a schema that skipped link) is still explained."""
    (violation,) = CompiledSchema({"type": "string", "pattern": "\\p{Greek}"}).check("zzz")
    assert violation.keyword == "pattern" and "does not match" in violation.message


# ─── local references ───────────────────────────────────────────────────────────────────

VALID_REFS = {
    "array-index": '{type: object, allOf: [{properties: {b: {type: string}}}], properties: {a: {$ref: "#/allOf/0/properties/b"}}}',
    "percent-encoded": '{type: object, $defs: {"a%b": {type: string}}, properties: {a: {$ref: "#/$defs/a%25b"}}}',
    "empty-tokens": '{type: object, $defs: {"": {$defs: {"": {type: string}}}}, properties: {a: {$ref: "#/$defs//$defs/"}}}',
    "tilde-escapes": '{type: object, $defs: {"a/b~c": {type: string}}, properties: {a: {$ref: "#/$defs/a~1b~0c"}}}',
    "dynamic-anchor": '{type: object, $defs: {s: {$dynamicAnchor: str, type: string}}, properties: {a: {$ref: "#str"}}}',
}


@pytest.mark.parametrize("name", list(VALID_REFS))
def test_valid_local_refs_load_and_validate(tmp_path: Path, name: str) -> None:
    root = write(tmp_path, VALID_REFS[name])
    assert call(root, {"a": "text"}).ok is True
    refused = call(root, {"a": 5})
    assert refused.ok is False and refused.error.code == "invalid_arguments" and "/a" in refused.model_text()


@pytest.mark.parametrize("ref, why", [
    ("#/allOf/00", "without leading zeros"),
    ("#/allOf/1", "has 1 item(s), no index 1"),
    ("#/allOf/-", "not an array index"),
    ("#/$defs/a~2", "RFC 6901"),
    ("#/$defs/missing", "has no key 'missing'"),
])
def test_broken_pointers_say_which_token_fails(ref: str, why: str) -> None:
    schema = {"$defs": {"a~2": {}}, "allOf": [{}], "properties": {"a": {"$ref": ref}}}
    (problem,) = schema_problems(schema)
    assert problem.startswith("at /properties/a/$ref:") and "points to nothing" in problem and why in problem


def test_anchor_in_an_embedded_resource_is_not_visible_from_the_root() -> None:
    """2020-12: an anchor belongs to the resource (`$id`) that declares it; so say both validators."""
    schema = {"$defs": {"x": {"$id": "https://example.com/x", "$anchor": "foo"}}, "$ref": "#foo"}
    (problem,) = schema_problems(schema)
    assert "names no $anchor or $dynamicAnchor in this schema resource" in problem
    inside = {"$defs": {"x": {"$id": "https://example.com/x", "$defs": {"y": {"type": "string"}},
                              "properties": {"a": {"$ref": "#/$defs/y"}}}}, "$ref": "#/$defs/x"}
    assert schema_problems(inside) == []


def test_remote_dynamic_ref_is_refused_like_a_remote_ref() -> None:
    (problem,) = schema_problems({"properties": {"a": {"$dynamicRef": "http://127.0.0.1:9/x#node"}}})
    assert "$dynamicRef 'http://127.0.0.1:9/x#node' points outside this schema" in problem

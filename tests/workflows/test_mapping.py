"""The mapping language: `$toolArgs` / `$steps` references, compiled into resolvers.

Unit tests for each form, property tests (hypothesis) for the resolver, and one end-to-end
workflow (tests/projects/mapping) that shows what a step really receives.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Engine
from engine.lang.mapping import MISSING, MappingError, MappingSyntaxError, compile_mapping, parse_reference

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "mapping"


def resolve(mapping: Any, args: dict[str, Any] | None = None, outputs: dict[str, Any] | None = None) -> Any:
    return compile_mapping(mapping)(args or {}, outputs or {})


# ─── unit tests ─────────────────────────────────────────────────────────────────────────


def test_tool_arg() -> None:
    assert resolve("$toolArgs.x", {"x": 5}) == 5


def test_bare_tool_args_is_every_argument() -> None:
    args = {"a": 1, "b": [2]}
    assert resolve("$toolArgs", args) is args


def test_whole_step_output() -> None:
    output = {"title": "t", "items": [1, 2]}
    assert resolve("$steps.extract.output", outputs={"extract": output}) is output


def test_dotted_path_and_indexes() -> None:
    outputs = {"extract": {"mustHave": ["python", "sql"], "meta": {"level": {"name": "senior"}}}}
    assert resolve("$steps.extract.output.mustHave[1]", outputs=outputs) == "sql"
    assert resolve("$steps.extract.output.meta.level.name", outputs=outputs) == "senior"
    assert resolve("$toolArgs.matrix[1][0]", {"matrix": [[1, 2], [3, 4]]}) == 3


def test_step_ids_and_keys_with_dashes() -> None:
    outputs = {"extract-requirements": {"must-have": ["x"]}}
    assert resolve("$steps.extract-requirements.output.must-have[0]", outputs=outputs) == "x"


def test_quoted_odd_keys() -> None:
    args = {"odd key": {"a.b": 1, 'quote"d': 2, "": 3}}
    assert resolve('$toolArgs["odd key"]["a.b"]', args) == 1
    assert resolve('$toolArgs["odd key"]["quote\\"d"]', args) == 2
    assert resolve('$toolArgs["odd key"][""]', args) == 3
    assert resolve('$steps.s.output["odd key"]["a.b"]', outputs={"s": args}) == 1


def test_dollar_dollar_escapes_one_dollar() -> None:
    assert resolve("$$toolArgs.x", {"x": 1}) == "$toolArgs.x"
    assert resolve("$$5") == "$5"
    assert resolve("$$$x") == "$$x"
    assert resolve({"price": "$$5", "list": ["$$steps.a.output"]}) == {"price": "$5", "list": ["$steps.a.output"]}


@pytest.mark.parametrize(
    "literal", ["plain", "", "costs $5", "$5", "$other", "$tool", "a $toolArgs.x", 0, 1.5, True, False, None]
)
def test_literals_are_untouched(literal: Any) -> None:
    assert resolve(literal, {"x": 1}) == literal


def test_nested_dicts_and_lists_are_walked() -> None:
    mapping = {
        "a": {"b": ["$toolArgs.x", {"c": "$steps.s.output.y"}, "lit", 3]},
        "d": [[["$toolArgs.x"]]],
        "e": "$$toolArgs",
    }
    assert resolve(mapping, {"x": 1}, {"s": {"y": [2]}}) == {
        "a": {"b": [1, {"c": [2]}, "lit", 3]},
        "d": [[[1]]],
        "e": "$toolArgs",
    }


def test_optional_absent_argument_drops_the_key() -> None:
    mapping = {"given": "$toolArgs.a", "absent": "$toolArgs.b", "deep": "$toolArgs.c.d", "list": ["$toolArgs.b", 1]}
    assert resolve(mapping, {"a": 1}) == {"given": 1, "list": [1]}
    assert resolve("$toolArgs.b", {"a": 1}) is MISSING


def test_present_null_argument_is_kept() -> None:
    assert resolve({"a": "$toolArgs.a"}, {"a": None}) == {"a": None}


@pytest.mark.parametrize(
    ("reference", "outputs", "reason"),
    [
        ("$steps.s.output.y", {"s": {"x": 1}}, "no key 'y'"),
        ("$steps.s.output.items[3]", {"s": {"items": [1, 2]}}, "2 items, no index 3"),
        ("$steps.s.output.x.y", {"s": {"x": 5}}, "int, not an object"),
        ("$steps.s.output[0]", {"s": {"x": 5}}, "not a list"),
        ("$steps.s.output[0]", {"s": "text"}, "str, not a list"),  # never a character of a string
        ("$steps.s.output.x[1]", {"s": {"x": "ab"}}, "str, not a list"),
        ("$steps.other.output", {"s": {}}, "has not produced an output"),
    ],
)
def test_unresolvable_step_path_raises(reference: str, outputs: dict[str, Any], reason: str) -> None:
    resolver = compile_mapping({"value": reference})
    with pytest.raises(MappingError) as caught:
        resolver({}, outputs)
    assert caught.value.reference == reference
    assert reason in caught.value.reason


def test_argument_path_through_a_string_is_absent_not_a_character() -> None:
    assert resolve("$toolArgs.x[0]", {"x": "abc"}) is MISSING


@pytest.mark.parametrize(
    "reference",
    [
        "$toolArgsX",
        "$toolArgs.",
        "$toolArgs..a",
        "$toolArgs.a b",
        "$toolArgs[x]",
        "$toolArgs[-1]",
        '$toolArgs["unterminated]',
        '$toolArgs["bad \\q escape"]',
        "$toolArgs.a.",
        "$steps",
        "$steps.",
        "$steps.a",
        "$steps.a.out",
        "$steps.a.outputs",
        "$steps..output",
        "$steps.a.output.",
        "$steps.a.output[",
    ],
)
def test_malformed_references_raise_syntax_errors(reference: str) -> None:
    with pytest.raises(MappingSyntaxError):
        parse_reference(reference)
    with pytest.raises(MappingSyntaxError):
        compile_mapping({"nested": [reference]})


def test_parse_reference_parts() -> None:
    ref = parse_reference('$steps.extract.output.mustHave[0]["odd key"]')
    assert (ref.source, ref.step_id, ref.path) == ("steps", "extract", ("mustHave", 0, "odd key"))
    ref = parse_reference("$toolArgs")
    assert (ref.source, ref.step_id, ref.path) == ("toolArgs", None, ())


def test_resolved_structures_are_fresh_per_call() -> None:
    resolver = compile_mapping({"a": ["$toolArgs.x"]})
    first = resolver({"x": 1}, {})
    first["a"].append("mutated")
    assert resolver({"x": 1}, {}) == {"a": [1]}


# ─── property tests ─────────────────────────────────────────────────────────────────────

PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
# Plain keys, keys that must be quoted, and arbitrary short text.
keys = st.sampled_from(["a", "b", "mustHave", "x-y", "_0", "9", "odd key", "a.b", "", 'q"t', "\\", "é", "[0]", "$x"]) | st.text(
    max_size=4
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=8,
)
step_ids = st.text("abcXYZ019_-", min_size=1, max_size=8).filter(lambda s: s[0] != "-")


def written(path: list[str | int]) -> str:
    """A path as a user would write it (independent of the engine's own formatter)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif PLAIN_KEY.fullmatch(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def random_path(data: st.DataObject, value: Any) -> tuple[list[str | int], Any]:
    """A random valid path into `value` and the value found there."""
    path: list[str | int] = []
    while isinstance(value, (dict, list)) and value and data.draw(st.booleans(), label="go deeper"):
        if isinstance(value, dict):
            key = data.draw(st.sampled_from(sorted(value)), label="key")
        else:
            key = data.draw(st.integers(0, len(value) - 1), label="index")
        path.append(key)
        value = value[key]
    return path, value


@settings(max_examples=50, deadline=None)
@given(args=st.dictionaries(keys, json_values, max_size=5), data=st.data())
def test_property_tool_args_paths_resolve_to_the_value_there(args: dict[str, Any], data: st.DataObject) -> None:
    path, expected = random_path(data, args)
    resolver = compile_mapping("$toolArgs" + written(path))
    assert resolver(args, {}) is expected


@settings(max_examples=50, deadline=None)
@given(step_id=step_ids, output=json_values, other=json_values, data=st.data())
def test_property_step_paths_resolve_to_the_value_there(step_id: str, output: Any, other: Any, data: st.DataObject) -> None:
    path, expected = random_path(data, output)
    outputs = {step_id: output, step_id + "-other": other}
    reference = f"$steps.{step_id}.output" + written(path)
    assert compile_mapping(reference)({}, outputs) is expected
    assert compile_mapping({"wrapped": [reference]})({}, outputs) == {"wrapped": [expected]}


def json_walk(value: Any, path: list[str | int]) -> Any:
    """The value at `path` by JSON rules (objects by key, arrays by index), or MISSING."""
    for part in path:
        if isinstance(part, int) and isinstance(value, list) and part < len(value):
            value = value[part]
        elif isinstance(part, str) and isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return MISSING
    return value


@settings(max_examples=50, deadline=None)
@given(
    output=json_values,
    path=st.lists(keys | st.integers(0, 4), max_size=4),
    args=st.dictionaries(keys, json_values, max_size=4),
)
def test_property_any_path_resolves_by_json_rules_or_fails_cleanly(output: Any, path: list[str | int], args: dict[str, Any]) -> None:
    expected = json_walk(output, path)
    resolver = compile_mapping("$steps.s.output" + written(path))
    if expected is MISSING:
        with pytest.raises(MappingError):
            resolver({}, {"s": output})
    else:
        assert resolver({}, {"s": output}) is expected
    assert compile_mapping("$toolArgs" + written(path))(args, {}) is json_walk(args, path)


literal_strings = st.text(max_size=12).filter(lambda s: not s.startswith("$"))
literals = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | literal_strings,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=8,
)


@settings(max_examples=50, deadline=None)
@given(value=literals, args=st.dictionaries(keys, json_values, max_size=3))
def test_property_literals_round_trip(value: Any, args: dict[str, Any]) -> None:
    assert compile_mapping(value)(args, {}) == value


@settings(max_examples=50, deadline=None)
@given(text=st.text(max_size=20))
def test_property_double_dollar_loses_exactly_one_dollar(text: str) -> None:
    assert compile_mapping("$$" + text)({"x": 1}, {}) == "$" + text
    assert compile_mapping({"k": ["$$" + text]})({}, {}) == {"k": ["$" + text]}


# ─── end to end ─────────────────────────────────────────────────────────────────────────


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.from_dir(PROJECT)


def test_what_a_step_receives(engine: Engine) -> None:
    value = {"items": ["a", "b"], "odd key": {"x": 1}}
    result = engine.call_tool_sync("pick", {"value": value, "note": "n"})
    assert result.ok, result.error
    assert result.data == {
        "second": "b",
        "odd": {"x": 1},
        "note": "n",
        "list": ["n", "fixed"],  # the absent optional `tags` is dropped from the list
        "price": "$5",
        "escaped": "$toolArgs.value",
        "nested": {"deep": [{"all": {"value": value, "note": "n"}}]},
        "number": 7,
    }


def test_absent_optional_argument_is_not_passed(engine: Engine) -> None:
    result = engine.call_tool_sync("pick", {"value": {"items": [1, 2], "odd key": 0}})
    assert result.ok, result.error
    assert "note" not in result.data and result.data["list"] == ["fixed"]


@pytest.mark.parametrize(
    ("value", "reason"),
    [({"items": ["only"], "odd key": 1}, "no index 1"), ({"items": "ab", "odd key": 1}, "not a list"), ({"items": [1, 2]}, "odd key")],
)
def test_unresolvable_reference_fails_the_step(engine: Engine, value: Any, reason: str) -> None:
    events = []
    result = engine.call_tool_sync("pick", {"value": value}, on_event=events.append)
    assert not result.ok and result.error.code == "execution_error"
    assert reason in result.error.message and "$steps.produce.output" in result.error.message
    [error] = [e for e in events if e.type == "skill_error"]
    assert error.step_id == "show" and reason in error.data["message"]

"""engine.lang.strict_schema: which schemas OpenAI strict mode can take, their strict form, and
the nulls it makes a model send for optional properties dropped again."""

from __future__ import annotations

from typing import Any

import pytest

from engine.lang.strict_schema import NotStrict, StrictSchema, to_strict


def strict(schema: dict[str, Any]) -> StrictSchema:
    form = to_strict(schema)
    assert isinstance(form, StrictSchema), form
    return form


QUALIFY = [
    ("flat, one optional", {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}, "required": ["q"]}),
    ("no arguments", {"type": "object", "properties": {}, "additionalProperties": False}),
    ("nested object in an array", {"type": "object", "properties": {"rows": {"type": "array", "maxItems": 3, "items": {
        "type": "object", "properties": {"a": {"type": "number", "minimum": 0}}}}}}),
    ("enum, const, pattern, format", {"type": "object", "properties": {
        "unit": {"enum": ["c", "f"]}, "v": {"const": 1}, "id": {"type": "string", "pattern": "^[a-z]+$", "format": "uuid"}},
        "required": ["unit", "v", "id"]}),
    ("anyOf below the root", {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}),
    ("$defs and a recursive $ref", {"type": "object", "properties": {"node": {"$ref": "#/$defs/node"}},
                                    "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}}),
    ("annotations are left out", {"type": "object", "properties": {"n": {"type": "integer", "default": 3, "examples": [1]}},
                                  "$schema": "https://json-schema.org/draft/2020-12/schema"}),
]

NOT_QUALIFY = [
    ("minLength", {"type": "object", "properties": {"q": {"type": "string", "minLength": 1}}}, "minLength", "/properties/q/minLength"),
    ("oneOf", {"type": "object", "properties": {"q": {"oneOf": [{"type": "string"}]}}}, "oneOf", "/properties/q/oneOf"),
    ("allOf", {"type": "object", "allOf": [{"required": []}]}, "allOf", "/allOf"),
    ("open object", {"type": "object", "properties": {}, "additionalProperties": True}, "additionalProperties", "/additionalProperties"),
    ("free-form nested", {"type": "object", "properties": {"meta": {"type": "object"}}}, "properties", "/properties/meta"),
    ("patternProperties", {"type": "object", "properties": {}, "patternProperties": {"^x": {"type": "string"}}},
     "patternProperties", "/patternProperties"),
    ("no type", {"type": "object", "properties": {"any": {"description": "anything"}}}, "type", "/properties/any"),
    ("root anyOf", {"type": "object", "properties": {}, "anyOf": [{"type": "object"}]}, "anyOf", "/anyOf"),
    ("not an object", {"type": "array", "items": {"type": "string"}}, "type", ""),
    ("ref elsewhere", {"type": "object", "properties": {"a": {"type": "string"}, "b": {"$ref": "#/properties/a"}}},
     "$ref", "/properties/b/$ref"),
    ("key with a slash", {"type": "object", "properties": {"a/b": {"type": "string", "maxLength": 3}}}, "maxLength",
     "/properties/a~1b/maxLength"),
    ("uniqueItems", {"type": "object", "properties": {"t": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}},
     "uniqueItems", "/properties/t/uniqueItems"),
]


@pytest.mark.parametrize("name,schema", QUALIFY, ids=[q[0] for q in QUALIFY])
def test_qualifying_schemas_get_closed_objects_with_every_property_required(name: str, schema: dict[str, Any]) -> None:
    form = strict(schema)
    for node in _objects(form.schema):
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    assert "default" not in str(form.schema) and "$schema" not in form.schema and "examples" not in str(form.schema)


@pytest.mark.parametrize("name,schema,keyword,pointer", NOT_QUALIFY, ids=[q[0] for q in NOT_QUALIFY])
def test_unsupported_keywords_are_named_with_their_pointer(name: str, schema: dict[str, Any], keyword: str, pointer: str) -> None:
    form = to_strict(schema)
    assert isinstance(form, NotStrict)
    assert (form.keyword, form.pointer) == (keyword, pointer)
    assert str(form).startswith(f"{keyword!r} at {pointer or '/'}: ")


def test_optional_properties_become_nullable_required_ones_do_not() -> None:
    form = strict({"type": "object", "properties": {
        "q": {"type": "string"}, "n": {"type": "integer"}, "unit": {"enum": ["c", "f"]}, "tags": {"type": ["array"], "items": {"type": "string"}},
        "maybe": {"type": ["string", "null"]}, "ref": {"$ref": "#/$defs/r"}}, "required": ["q"],
        "$defs": {"r": {"type": "object", "properties": {}}}})
    props = form.schema["properties"]
    assert props["q"] == {"type": "string"}
    assert props["n"] == {"type": ["integer", "null"]}
    assert props["unit"] == {"anyOf": [{"enum": ["c", "f"]}, {"type": "null"}]}
    assert props["tags"] == {"type": ["array", "null"], "items": {"type": "string"}}
    assert props["maybe"] == {"type": ["string", "null"]}  # already nullable: as written
    assert props["ref"] == {"anyOf": [{"$ref": "#/$defs/r"}, {"type": "null"}]}
    assert form.schema["required"] == ["q", "n", "unit", "tags", "maybe", "ref"]


def test_nulls_are_dropped_only_where_strict_mode_put_them() -> None:
    form = strict({"type": "object", "required": ["q", "keep"], "properties": {
        "q": {"type": "string"}, "n": {"type": "integer"}, "keep": {"type": ["string", "null"]},
        "also": {"type": ["string", "null"]},
        "rows": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]}},
        "node": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "string"}, "next": {"$ref": "#/$defs/node"}}, "required": ["v"]}}})
    sent = {"q": "x", "n": None, "keep": None, "also": None, "rows": [{"a": "1", "b": None}, {"a": "2", "b": "y"}],
            "node": {"v": "a", "next": {"v": "b", "next": None}}}
    assert form.drop_nulls(sent) == {"q": "x", "keep": None, "also": None, "rows": [{"a": "1"}, {"a": "2", "b": "y"}],
                                     "node": {"v": "a", "next": {"v": "b"}}}
    assert sent["n"] is None  # the input is not changed
    clean = {"q": "x", "keep": "k"}
    assert form.drop_nulls(clean) is clean
    assert form.answer_text('{"q": "x", "n": null, "keep": null}') == '{"q": "x", "keep": null}'
    assert form.answer_text("not json") == "not json"


def test_a_schema_without_optional_properties_has_no_null_plan() -> None:
    form = strict({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
    assert form.nulls is None
    value = {"q": None}
    assert form.drop_nulls(value) is value


def _objects(schema: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(schema, dict):
        if "properties" in schema:
            found.append(schema)
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                for sub in value.values():
                    found += _objects(sub)
            elif key == "items":
                found += _objects(value)
            elif key == "anyOf":
                for sub in value:
                    found += _objects(sub)
    return found

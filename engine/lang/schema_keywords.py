"""Unknown keywords in a JSON Schema: `minLenght: 3` is valid JSON Schema and checks nothing.

Draft 2020-12 ignores keywords it does not know, so a misspelt constraint silently stops
constraining. `unknown_keywords(schema)` finds them (walking only where schemas are, never
into `properties` names or `const`/`enum`/`default`/`examples` data) and says what was
probably meant. They are load warnings, not errors: the schema is valid and runs as written.
Keywords starting with `x-` are extensions by convention and pass.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable

KNOWN = frozenset({
    # core
    "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment", "$defs",
    # applicators
    "prefixItems", "items", "contains", "additionalProperties", "properties", "patternProperties",
    "dependentSchemas", "propertyNames", "if", "then", "else", "allOf", "anyOf", "oneOf", "not",
    "unevaluatedItems", "unevaluatedProperties",
    # validation
    "type", "const", "enum", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
    "maxProperties", "minProperties", "required", "dependentRequired",
    # annotations, format, content
    "title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples", "format",
    "contentEncoding", "contentMediaType", "contentSchema",
    # earlier drafts' names that still work as $ref targets
    "definitions",
})
# Words of earlier drafts or of OpenAPI that 2020-12 ignores, and what to write instead.
REPLACED = {
    "dependencies": "use dependentRequired (a list of names) or dependentSchemas (a schema) instead",
    "additionalItems": "in Draft 2020-12 write items: (the schema for items after prefixItems)",
    "nullable": 'allow null in the type instead: type: [string, "null"]',
    "example": "write examples: [ … ] (a list)",
    "optional": "list the required properties under required: instead; the others are optional",
}
_SCHEMA = ("items", "contains", "additionalProperties", "propertyNames", "if", "then", "else", "not",
           "unevaluatedItems", "unevaluatedProperties", "contentSchema", "additionalItems")
_SCHEMA_LISTS = ("prefixItems", "allOf", "anyOf", "oneOf", "items")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


@dataclass(frozen=True, slots=True)
class UnknownKeyword:
    """A keyword validation ignores, where it is (the path to the key inside the schema), the fix."""

    path: tuple[str | int, ...]
    keyword: str
    hint: str

    @property
    def message(self) -> str:
        return f"unknown JSON Schema keyword {self.keyword!r}: it is ignored, so it checks nothing"


def unknown_keywords(schema: Any) -> list[UnknownKeyword]:
    """Every keyword of `schema` (and of its subschemas) that Draft 2020-12 does not know."""
    found: list[UnknownKeyword] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if not isinstance(key, str):
                continue
            if key not in KNOWN and not key.startswith("x-"):
                found.append(UnknownKeyword(path + (key,), key, _hint(key, value)))
                continue
            if key in _SCHEMA:
                stack.append((value, path + (key,)))
            if key in _SCHEMA_LISTS and isinstance(value, list):
                stack.extend((item, path + (key, index)) for index, item in enumerate(value))
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                stack.extend((sub, path + (key, name)) for name, sub in value.items())
    return sorted(found, key=lambda w: [str(p) for p in w.path])


def _hint(keyword: str, value: Any) -> str:
    if value is None and " " in keyword.strip():  # `{description: The role, in a few words}`
        return "a comma inside { } ends the value before it: quote that value (description: \"a, b\")"
    if keyword in REPLACED:
        return REPLACED[keyword]
    lowered = {k.lower(): k for k in KNOWN}
    exact = lowered.get(keyword.lower().replace("_", "").replace("-", ""))
    close = [exact] if exact else difflib.get_close_matches(keyword, sorted(KNOWN), n=1, cutoff=0.75)
    if close:
        return f"did you mean {close[0]}?"
    return "remove it, or spell it x-… if it is an extension for another tool"


def warn_unknown_keywords(entry: Any, field: str, schema: Any, warn: Callable[[Any, str, str], None]) -> None:
    """Report each unknown keyword of `entry`'s `field` schema through `warn(location, message, hint)`.

    `entry` is a loaded spec (`engine.spec.loader.Entry`): its `loc` finds the keyword's line.
    """
    kind = str(entry.path[0])[:-1] if entry.path else "spec"  # "tools" → "tool"
    for unknown in unknown_keywords(schema):
        warn(entry.loc(field, *unknown.path, key=True), f"{unknown.message} (in {field!r} of {kind} {entry.name!r})", unknown.hint)

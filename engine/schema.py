"""JSON Schema: compiled validation, defaults, and static reading of schemas for link checks.

Two validators, one verdict. The Python `jsonschema` package is the reference: it checks
schemas against the Draft 2020-12 meta-schema and writes the detailed, JSON-Pointer error
messages users see. On the per-call path we ask `jsonschema-rs` (compiled once at link time,
~0.5 µs per call) for the verdict, and only when it says "invalid" do we ask `jsonschema` for
the errors. `tests/test_schema_parity.py` proves both give the same verdicts.
Formats are annotations in both (Draft 2020-12's default), so their verdicts agree.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import jsonschema
import jsonschema_rs

Draft = jsonschema.Draft202012Validator


@dataclass(frozen=True, slots=True)
class Violation:
    """One reason a value does not fit a schema, located by JSON Pointer."""

    pointer: str  # e.g. "/days/3/tasks"; "" for the value itself
    message: str
    keyword: str

    def as_dict(self) -> dict[str, str]:
        return {"pointer": self.pointer or "/", "message": self.message, "keyword": self.keyword}


def _pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def schema_problems(schema: Any) -> list[str]:
    """Why `schema` is not a valid Draft 2020-12 schema (empty list: it is valid)."""
    if not isinstance(schema, (dict, bool)):
        return ["a JSON Schema must be a mapping (or true/false)"]
    try:
        if jsonschema_rs.meta.is_valid(schema):
            return []
    except Exception:  # noqa: BLE001 - rs refuses some inputs the reference can judge
        pass
    problems = []
    for error in sorted(Draft(Draft.META_SCHEMA).iter_errors(schema), key=lambda e: list(e.path)):
        where = _pointer(error.path) or "/"
        problems.append(f"at {where}: {error.message}")
    try:
        jsonschema_rs.validator_for(schema)
    except Exception as exc:  # noqa: BLE001 - e.g. an unresolvable $ref or a bad regex
        problems.append(str(exc).splitlines()[0])
    return problems


class CompiledSchema:
    """A schema compiled once: fast verdicts, detailed errors on demand, defaults applied."""

    __slots__ = ("schema", "_fast", "_reference", "_defaults")

    def __init__(self, schema: dict[str, Any] | bool):
        self.schema = schema
        self._fast = jsonschema_rs.validator_for(schema, validate_formats=False)
        self._reference: Any = None  # built on first failure: it is rarely needed
        self._defaults = _compile_defaults(schema)

    def is_valid(self, value: Any) -> bool:
        return self._fast.is_valid(value)

    def violations(self, value: Any) -> list[Violation]:
        """Every error, best first within each location, sorted by JSON Pointer."""
        if self._reference is None:
            self._reference = Draft(self.schema)
        errors = sorted(self._reference.iter_errors(value), key=lambda e: (list(map(str, e.path)), e.validator))
        return [Violation(_pointer(e.path), e.message, str(e.validator)) for e in errors]

    def check(self, value: Any) -> list[Violation]:
        """Empty list when valid; otherwise the reference validator's errors."""
        if self._fast.is_valid(value):
            return []
        found = self.violations(value)
        return found or [Violation("", "value does not match the schema", "schema")]

    @property
    def has_defaults(self) -> bool:
        return bool(self._defaults)

    def with_defaults(self, value: Any) -> Any:
        """A copy of `value` with declared `default`s filled in (the input is never mutated)."""
        if not self._defaults or not isinstance(value, dict):
            return value
        return _apply_defaults(value, self._defaults)


_Defaults = list[tuple[str, Any, "list[Any]"]]


def _compile_defaults(schema: Any) -> _Defaults:
    """(property, default, nested defaults) for object properties, walked once at link time."""
    if not isinstance(schema, dict):
        return []
    out: _Defaults = []
    for key, sub in (schema.get("properties") or {}).items():
        if not isinstance(sub, dict):
            continue
        nested = _compile_defaults(sub) if sub.get("type") == "object" else []
        if "default" in sub or nested:
            out.append((key, sub.get("default", _NO_DEFAULT), nested))
    return out


_NO_DEFAULT = object()


def _apply_defaults(value: dict[str, Any], defaults: _Defaults) -> dict[str, Any]:
    result = dict(value)
    for key, default, nested in defaults:
        if key not in result:
            if default is not _NO_DEFAULT:
                result[key] = copy.deepcopy(default)
        elif nested and isinstance(result[key], dict):
            result[key] = _apply_defaults(result[key], nested)
    return result


# ─── static reading, for link-time data-flow checks ─────────────────────────────────────

JSON_TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


class SchemaReader:
    """Reads sub-schemas along a path and the JSON types a schema admits.

    `None` stands for "unknown / anything": a check against it always passes.
    """

    def __init__(self, root: Any):
        self.root = root

    def resolve(self, schema: Any) -> Any:
        """Follow local `$ref`s (`#/$defs/x`); anything else stays as it is."""
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
            ref = schema["$ref"]
            if not ref.startswith("#"):
                return None
            node: Any = self.root
            for part in [p for p in ref[1:].split("/") if p]:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and part in node:
                    node = node[part]
                else:
                    return None
            schema = node
            seen += 1
        return schema

    def types(self, schema: Any) -> frozenset[str] | None:
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return None
        if "const" in schema:
            return frozenset({_type_of(schema["const"])})
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return frozenset(_type_of(v) for v in schema["enum"])
        declared = schema.get("type")
        if isinstance(declared, str):
            return frozenset({declared})
        if isinstance(declared, list):
            return frozenset(declared)
        for combinator in ("anyOf", "oneOf"):
            options = schema.get(combinator)
            if isinstance(options, list) and options:
                found: set[str] = set()
                for option in options:
                    option_types = self.types(option)
                    if option_types is None:
                        return None
                    found |= option_types
                return frozenset(found)
        if "properties" in schema:
            return frozenset({"object"})
        if "items" in schema or "prefixItems" in schema:
            return frozenset({"array"})
        return None

    def child(self, schema: Any, step: str | int) -> tuple[bool, Any]:
        """(exists, sub-schema) for one path step. exists=False: the path cannot exist."""
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return True, None
        types = self.types(schema)
        if isinstance(step, int):
            if types is not None and "array" not in types:
                return False, None
            prefix = schema.get("prefixItems")
            if isinstance(prefix, list) and step < len(prefix):
                return True, prefix[step]
            items = schema.get("items")
            return (items is not False), (items if isinstance(items, dict) else None)
        if types is not None and "object" not in types:
            return False, None
        properties = schema.get("properties") or {}
        if step in properties:
            return True, properties[step]
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            return True, additional
        if additional is True or schema.get("patternProperties") or not properties:
            return additional is not False, None
        # Declared properties and no open door: the path names nothing the schema promises.
        return False, None

    def is_required(self, schema: Any, key: str) -> bool:
        schema = self.resolve(schema)
        return isinstance(schema, dict) and key in (schema.get("required") or [])

    def has_default(self, schema: Any, key: str) -> bool:
        schema = self.resolve(schema)
        props = (schema or {}).get("properties") if isinstance(schema, dict) else None
        return isinstance(props, dict) and isinstance(props.get(key), dict) and "default" in props[key]


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def types_fit(source: frozenset[str] | None, target: frozenset[str] | None) -> bool:
    """Can every value of the source types be accepted by the target types?"""
    if source is None or target is None:
        return True
    widened = set(target)
    if "number" in widened:
        widened.add("integer")
    return source <= widened


def describe_types(types: frozenset[str] | None) -> str:
    if types is None:
        return "any"
    return " or ".join(sorted(types))


def literal_types(value: Any) -> frozenset[str]:
    return frozenset({_type_of(value)})

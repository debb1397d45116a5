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


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """Why a schema is invalid, and where inside the schema (a path of keys and indexes)."""

    path: tuple[str | int, ...]
    message: str

    def __str__(self) -> str:
        return f"at {_pointer(self.path) or '/'}: {self.message}"


def schema_problems(schema: Any) -> list[str]:
    """Why `schema` is not a valid Draft 2020-12 schema (empty list: it is valid)."""
    return [str(problem) for problem in schema_problem_details(schema)]


def schema_problem_details(schema: Any) -> list[SchemaProblem]:
    """Like `schema_problems`, with each problem's path inside the schema.

    `$ref`s are checked here first: only local ones (`#/$defs/…`, `#anchor`) are allowed, so
    compiling a schema never reaches out to the network for a remote document.
    """
    if not isinstance(schema, (dict, bool)):
        return [SchemaProblem((), "a JSON Schema must be a mapping (or true/false)")]
    problems = _ref_problems(schema) if type(schema) is dict and _mentions_ref(schema) else []  # most have none: skip the walk
    if not problems:
        try:
            if jsonschema_rs.meta.is_valid(schema):
                _remember(schema, jsonschema_rs.validator_for(schema, validate_formats=False))
                return []
        except Exception:  # noqa: BLE001 - rs refuses some inputs the reference can judge
            pass
    meta = Draft(Draft.META_SCHEMA)
    problems += _pattern_problems(schema)
    problems += [
        SchemaProblem(tuple(error.path), _meta_message(error))
        for error in sorted(meta.iter_errors(schema), key=lambda e: [str(p) for p in e.path])
    ]
    if problems:
        return sorted(problems, key=lambda p: [str(part) for part in p.path])
    try:
        jsonschema_rs.validator_for(schema)
    except Exception as exc:  # noqa: BLE001 - whatever else the compiler refuses
        message = str(getattr(exc, "message", None) or exc).splitlines()[0]
        problems.append(SchemaProblem(tuple(getattr(exc, "instance_path", None) or ()), message))
    return problems


def _mentions_ref(schema: Any) -> bool:
    """Does any mapping in the schema, data values included, have a `$ref` key? (No paths kept.)"""
    stack = [schema]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if type(node) is dict:
            if "$ref" in node:
                return True
            node = node.values()
        for value in node:
            kind = type(value)
            if kind is dict or kind is list:
                push(value)
    return False


_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})  # values, not schemas


def _walk_schemas(schema: Any) -> list[tuple[tuple[str | int, ...], dict[str, Any]]]:
    """Every mapping in a schema with its path, skipping values given as data (const, enum…)."""
    found: list[tuple[tuple[str | int, ...], dict[str, Any]]] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            found.append((path, node))
            stack.extend((v, path + (k,)) for k, v in node.items() if k not in _DATA_KEYWORDS)
        elif isinstance(node, list):
            stack.extend((v, path + (i,)) for i, v in enumerate(node))
    return found


def _pattern_problems(schema: Any) -> list[SchemaProblem]:
    """Regexes the validator cannot compile (judged by jsonschema-rs, the one that runs them)."""
    problems = []
    for path, node in _walk_schemas(schema):
        patterns = [(("pattern",), node.get("pattern"))]
        if isinstance(node.get("patternProperties"), dict):
            patterns += [(("patternProperties", key), key) for key in node["patternProperties"]]
        for sub, pattern in patterns:
            if not isinstance(pattern, str):
                continue
            try:
                jsonschema_rs.validator_for({"pattern": pattern})
            except Exception:  # noqa: BLE001 - rs raises its own ValidationError
                problems.append(SchemaProblem(path + sub, f"{pattern!r} is not a valid regular expression"))
    return problems


def _ref_problems(schema: Any) -> list[SchemaProblem]:
    """`$ref`s that point outside the schema, or to nothing inside it."""
    anchors: set[str] = set()
    refs: list[tuple[tuple[str | int, ...], str]] = []
    for path, node in _walk_schemas(schema):
        if isinstance(node.get("$anchor"), str):
            anchors.add(node["$anchor"])
        if isinstance(node.get("$ref"), str):
            refs.append((path + ("$ref",), node["$ref"]))
    problems = []
    for path, ref in sorted(refs, key=lambda r: [str(p) for p in r[0]]):
        if not ref.startswith("#"):
            problems.append(SchemaProblem(path, f"$ref {ref!r} points outside this schema; only local references are supported"))
        elif ref.startswith("#/") or ref == "#":
            if SchemaReader(schema).resolve({"$ref": ref}) is None:
                problems.append(SchemaProblem(path, f"$ref {ref!r} points to nothing in this schema"))
        elif ref[1:] not in anchors:
            problems.append(SchemaProblem(path, f"$ref {ref!r} names no $anchor in this schema"))
    return problems


_TYPE_NAMES = ("array", "boolean", "integer", "null", "number", "object", "string")


def _meta_message(error: Any) -> str:
    """The meta-schema's complaint, said the way a schema author thinks of it."""
    path = list(error.path)
    if path and path[-1] == "type" or len(path) >= 2 and path[-2] == "type":
        wrong = [t for t in (error.instance if isinstance(error.instance, list) else [error.instance]) if t not in _TYPE_NAMES]
        if wrong:
            return f"{wrong[0]!r} is not a JSON Schema type; use one of {', '.join(_TYPE_NAMES)}"
    if error.context:
        return jsonschema.exceptions.best_match(error.context).message
    return error.message


# Link checks a schema by compiling it; the CompiledSchema built right after for the same
# object takes that validator instead of compiling again. Bounded, keyed by identity.
_JUST_COMPILED: dict[int, tuple[Any, Any]] = {}
_JUST_COMPILED_MAX = 4096


def _remember(schema: Any, validator: Any) -> None:
    if len(_JUST_COMPILED) >= _JUST_COMPILED_MAX:
        _JUST_COMPILED.pop(next(iter(_JUST_COMPILED)))
    _JUST_COMPILED[id(schema)] = (schema, validator)


def _compiled(schema: Any) -> Any:
    found = _JUST_COMPILED.pop(id(schema), None)
    if found is not None and found[0] is schema:
        return found[1]
    return jsonschema_rs.validator_for(schema, validate_formats=False)


class CompiledSchema:
    """A schema compiled once: fast verdicts, detailed errors on demand, defaults applied."""

    __slots__ = ("schema", "_fast", "_reference", "_defaults", "has_defaults")

    def __init__(self, schema: dict[str, Any] | bool):
        self.schema = schema
        self._fast = _compiled(schema)
        self._reference: Any = None  # built on first failure: it is rarely needed
        self._defaults = _compile_defaults(schema)
        self.has_defaults = bool(self._defaults)  # a plain attribute: read on every call

    def is_valid(self, value: Any) -> bool:
        try:
            return self._fast.is_valid(value)
        except ValueError:  # not JSON data (a Python object in a dict): check() says so
            return False

    def violations(self, value: Any) -> list[Violation]:
        """Every error, best first within each location, sorted by JSON Pointer."""
        if self._reference is None:
            self._reference = Draft(self.schema)
        errors = sorted(self._reference.iter_errors(value), key=lambda e: (list(map(str, e.path)), e.validator))
        return [Violation(_pointer(e.path), e.message, str(e.validator)) for e in errors]

    def check(self, value: Any) -> list[Violation]:
        """Empty list when valid; otherwise the reference validator's errors."""
        try:
            if self._fast.is_valid(value):
                return []
        except ValueError as exc:
            return [Violation("", f"the value is not JSON data: {exc}", "type")]
        found = self.violations(value)
        return found or [Violation("", "value does not match the schema", "schema")]

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


_ARTICLE = {"array": "an array", "integer": "an integer", "object": "an object", "null": "null"}


def describe_types_article(types: frozenset[str] | None) -> str:
    """`frozenset({'array'})` → 'an array'; several → 'a number or a string'."""
    if types is None:
        return "any value"
    return " or ".join(_ARTICLE.get(t, f"a {t}") for t in sorted(types))


def literal_types(value: Any) -> frozenset[str]:
    return frozenset({_type_of(value)})

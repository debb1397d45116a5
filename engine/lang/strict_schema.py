"""OpenAI strict mode: a JSON Schema rewritten into the subset `strict: true` accepts.

Strict mode (tool definitions' `strict: true`, `response_format` `json_schema` with
`strict: true`) makes the server decode only what the schema allows, but only for a subset
of JSON Schema, and it wants every object closed (`additionalProperties: false`) and every
property listed in `required`. `to_strict(schema)` does that rewrite once, at link time:

- each object gets `additionalProperties: false` and all its properties in `required`;
- a property that was optional becomes nullable (`type: [T, "null"]`, or `anyOf: [S, {type: null}]`),
  and is remembered: the `null` a model then sends for it is dropped again
  (`StrictSchema.drop_nulls`), so the tool sees what it would have seen without strict mode
  (and its `default`, if any, applies);
- annotations strict mode does not take (`default`, `examples`, a `format` it does not know…)
  are left out of what is sent: the engine does not check them either.

A keyword strict mode does not support (`oneOf`, `allOf`, `minLength`, `patternProperties`,
an object that allows other keys…) makes the schema not qualify: `to_strict` returns a
`NotStrict` naming the keyword and its JSON Pointer.

The linker keeps each tool's form on its LinkedTool and a skill or agent its answer's on its
AnswerSchema (runtime/answers.py); requests carry them to the provider (ModelRequest), so
nothing is computed per call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# What OpenAI's strict mode accepts (platform.openai.com/docs/guides/structured-outputs,
# "Supported schemas"); anything else leaves the schema non-strict.
SUPPORTED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref", "$defs",
    "definitions", "title", "description", "pattern", "format", "multipleOf", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
})
# Annotations the engine does not enforce and strict mode does not take: not sent.
DROPPED = frozenset({"default", "examples", "$comment", "$schema", "deprecated", "readOnly", "writeOnly"})
FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
MAX_DEPTH = 10  # nesting of objects strict mode allows
MAX_PROPERTIES = 5000


@dataclass(frozen=True, slots=True)
class NotStrict:
    """Why a schema cannot be sent strict: the keyword, where (a JSON Pointer), and what to do."""

    keyword: str
    pointer: str
    reason: str

    @property
    def path(self) -> tuple[str, ...]:
        """The pointer's tokens (for a YAML location)."""
        if not self.pointer:
            return ()
        return tuple(t.replace("~1", "/").replace("~0", "~") for t in self.pointer[1:].split("/"))

    def __str__(self) -> str:
        return f"{self.keyword!r} at {self.pointer or '/'}: {self.reason}"


@dataclass(eq=False)
class NullPlan:
    """Where a strict schema made an optional property nullable: `drop` at this object,
    `properties` and `items` below it. Built once; cyclic for recursive `$ref`s."""

    drop: frozenset[str] = frozenset()
    properties: dict[str, "NullPlan"] = field(default_factory=dict)
    items: "NullPlan | None" = None

    @property
    def empty(self) -> bool:
        return not self.drop and not self.properties and self.items is None


@dataclass(frozen=True, eq=False)
class StrictSchema:
    """A schema's strict form (`schema`, what is sent) and where its nulls must be dropped."""

    original: dict[str, Any]
    schema: dict[str, Any]
    nulls: NullPlan | None  # None: no optional property was made nullable

    def answer_text(self, text: str) -> str:
        """A strict answer's JSON text without those nulls (as it is when it has none, or is not JSON)."""
        if self.nulls is None:
            return text
        try:
            value = json.loads(text)
        except ValueError:
            return text  # the skill reports it, as for any answer
        trimmed = _drop(value, self.nulls)
        return text if trimmed is value else json.dumps(trimmed, ensure_ascii=False)

    def drop_nulls(self, value: Any) -> Any:
        """`value` without the nulls strict mode made a model send for optional properties
        (the same object when there are none)."""
        return value if self.nulls is None else _drop(value, self.nulls)


def _drop(value: Any, plan: NullPlan) -> Any:
    if isinstance(value, list):
        if plan.items is None:
            return value
        items = [_drop(item, plan.items) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if not isinstance(value, dict):
        return value
    out = value
    for key, item in value.items():
        if item is None and key in plan.drop:
            new: Any = _MISSING
        else:
            sub = plan.properties.get(key)
            new = item if sub is None else _drop(item, sub)
        if new is not item:
            if out is value:
                out = dict(value)
            if new is _MISSING:
                del out[key]
            else:
                out[key] = new
    return out


_MISSING = object()


def to_strict(schema: Any) -> StrictSchema | NotStrict:
    """The strict form of a tool's parameters or an answer's schema (an object at the root)."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return NotStrict("type", "", "strict mode needs an object at the root (type: object)")
    rewriter = _Rewriter(schema)
    try:
        strict = rewriter.schema(schema, "", 0)
    except _Refused as refused:
        return refused.why
    plan = rewriter.plans.get("")
    return StrictSchema(schema, strict, None if plan is None or _plan_empty(plan) else plan)


def _plan_empty(plan: NullPlan, seen: set[int] | None = None) -> bool:
    """No null to drop anywhere below (recursive plans are walked once)."""
    seen = set() if seen is None else seen
    if id(plan) in seen:
        return True
    seen.add(id(plan))
    if plan.drop:
        return False
    subs = list(plan.properties.values()) + ([plan.items] if plan.items is not None else [])
    return all(_plan_empty(sub, seen) for sub in subs)


class _Refused(Exception):
    def __init__(self, why: NotStrict):
        self.why = why


def _refuse(keyword: str, pointer: str, reason: str) -> _Refused:
    return _Refused(NotStrict(keyword, pointer, reason))


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


_REF_PREFIXES = ("#/$defs/", "#/definitions/")


class _Rewriter:
    """One walk over a schema: the strict copy, and a NullPlan per schema location."""

    def __init__(self, root: dict[str, Any]):
        self.root = root
        self.plans: dict[str, NullPlan] = {}  # pointer of an object schema (or a $ref target) → its plan
        self.properties = 0

    def schema(self, node: Any, pointer: str, depth: int) -> dict[str, Any]:
        if not isinstance(node, dict):
            raise _refuse("true" if node is True else "false", pointer, "a boolean schema has no strict form")
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in DROPPED or (key == "format" and value not in FORMATS):
                continue
            if key not in SUPPORTED:
                raise _refuse(key, f"{pointer}/{_escape(key)}", "strict mode does not support this keyword")
            out[key] = value
        if not any(k in node for k in ("type", "anyOf", "$ref", "enum", "const")):
            raise _refuse("type", pointer, "strict mode needs a type (or anyOf, enum, const, $ref) on every schema")
        self._children(node, out, pointer, depth)
        if _is_object(node):
            self._object(node, out, pointer, depth)
        return out

    def _children(self, node: dict[str, Any], out: dict[str, Any], pointer: str, depth: int) -> None:
        if "$ref" in node:
            ref = node["$ref"]
            if ref != "#" and not (isinstance(ref, str) and ref.startswith(_REF_PREFIXES) and ref.count("/") == 2):
                raise _refuse("$ref", f"{pointer}/$ref", "strict mode takes only `#` and `#/$defs/<name>` references")
        if "items" in node:
            out["items"] = self.schema(node["items"], f"{pointer}/items", depth)
        if "anyOf" in node:
            if not pointer:
                raise _refuse("anyOf", "/anyOf", "strict mode needs an object at the root, not anyOf")
            out["anyOf"] = [self.schema(sub, f"{pointer}/anyOf/{i}", depth) for i, sub in enumerate(node["anyOf"])]
        for defs in ("$defs", "definitions"):
            if defs in node:
                out[defs] = {name: self.schema(sub, f"{pointer}/{defs}/{_escape(name)}", depth)
                             for name, sub in node[defs].items()}

    def _object(self, node: dict[str, Any], out: dict[str, Any], pointer: str, depth: int) -> None:
        if depth >= MAX_DEPTH:
            raise _refuse("properties", pointer, f"strict mode allows objects nested {MAX_DEPTH} deep at most")
        if node.get("additionalProperties", False) is not False:
            raise _refuse("additionalProperties", f"{pointer}/additionalProperties",
                          "an object that takes other keys has no strict form (strict mode closes every object)")
        if "properties" not in node and "additionalProperties" not in node:
            raise _refuse("properties", pointer, "an object without `properties` takes any keys, and strict mode "
                          "would close it (for no keys write `properties: {}` and `additionalProperties: false`)")
        properties: dict[str, Any] = node.get("properties") or {}
        required = node.get("required") or []
        for name in required:
            if name not in properties:
                raise _refuse("required", f"{pointer}/required", f"{name!r} is required but not among the properties")
        self.properties += len(properties)
        if self.properties > MAX_PROPERTIES:
            raise _refuse("properties", pointer, f"strict mode allows {MAX_PROPERTIES} properties at most")
        plan = self.plans.setdefault(pointer, NullPlan())  # a `$ref` seen earlier may hold it already
        drop = set()
        new_props: dict[str, Any] = {}
        for name, sub in properties.items():
            where = f"{pointer}/properties/{_escape(name)}"
            strict_sub = self.schema(sub, where, depth + 1)
            if name not in required and not self._nullable(sub):
                strict_sub = _with_null(strict_sub)
                drop.add(name)
            child = self._plan_of(sub, where)
            if child is not None:
                plan.properties[name] = child
            new_props[name] = strict_sub
        plan.drop = frozenset(drop)
        out["properties"] = new_props
        out["required"] = list(properties)
        out["additionalProperties"] = False

    def _plan_of(self, sub: Any, where: str) -> NullPlan | None:
        """The plan for the value a (strict-walked) schema describes: its object's, its `$ref`
        target's, its items', its anyOf branches' together; None when it has no null to drop."""
        if not isinstance(sub, dict):
            return None
        if "$ref" in sub:  # kept even while empty: the target may be filled later in the walk
            return self.plans.setdefault(_target(sub["$ref"]), NullPlan())
        if "items" in sub:
            items = self._plan_of(sub["items"], f"{where}/items")
            return None if items is None else NullPlan(items=items)
        if "anyOf" in sub:  # whichever branch the value takes
            merged = NullPlan()
            for i, branch in enumerate(sub["anyOf"]):
                part = self._plan_of(branch, f"{where}/anyOf/{i}")
                if part is not None:
                    merged.drop = merged.drop | part.drop
                    merged.properties.update(part.properties)
                    merged.items = merged.items or part.items
            return None if merged.empty else merged
        plan = self.plans.get(where)
        return None if plan is None or plan.empty else plan

    def _nullable(self, node: Any, hops: int = 0) -> bool:
        """The original schema already takes null (then a null is the tool's to see)."""
        if not isinstance(node, dict) or hops > 8:
            return False
        kind = node.get("type")
        if kind == "null" or (isinstance(kind, list) and "null" in kind) or None in (node.get("enum") or ()):
            return True
        if "$ref" in node:
            return self._nullable(self._resolve(node["$ref"]), hops + 1)
        return any(self._nullable(branch, hops + 1) for branch in node.get("anyOf") or ())

    def _resolve(self, ref: str) -> Any:
        target: Any = self.root
        for token in _target(ref).split("/")[1:]:
            target = target.get(token.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
        return target


def _target(ref: str) -> str:
    """The pointer a checked `$ref` (`#`, `#/$defs/<name>`) names."""
    return "" if ref == "#" else ref[1:]


def _is_object(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def _with_null(node: dict[str, Any]) -> dict[str, Any]:
    """`node` that also takes null: `type: [T, "null"]` when that says it, else an anyOf."""
    kind = node.get("type")
    if isinstance(kind, (str, list)) and "$ref" not in node and "anyOf" not in node and "const" not in node:
        out = dict(node)
        out["type"] = [*kind, "null"] if isinstance(kind, list) else [kind, "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        return out
    return {"anyOf": [node, {"type": "null"}]}


def openai_function(name: str, description: str, parameters: dict[str, Any], strict: dict[str, Any] | None) -> dict[str, Any]:
    """A tool definition as OpenAI-compatible models are sent it: the strict form (`strict`, a
    StrictSchema's `schema`) with `strict: true` when there is one, else the parameters as they are."""
    function: dict[str, Any]
    if strict is None:
        function = {"name": name, "description": description, "parameters": parameters}
    else:
        function = {"name": name, "description": description, "parameters": strict, "strict": True}
    return {"type": "function", "function": function}


def openai_json_schema(schema: dict[str, Any], form: StrictSchema | None) -> dict[str, Any]:
    """`response_format.json_schema` for an answer schema: strict when it qualifies."""
    if form is None:
        return {"name": "output", "schema": schema}
    return {"name": "output", "schema": form.schema, "strict": True}

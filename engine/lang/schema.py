"""JSON Schema: compiled validation, defaults, and static reading of schemas for link checks.

Two validators, one verdict. The Python `jsonschema` package is the reference: it checks
schemas against the Draft 2020-12 meta-schema and writes the detailed, JSON-Pointer error
messages users see. On the per-call path we ask `jsonschema-rs` (compiled once at link time,
~0.5 µs per call) for the verdict, and only when it says "invalid" do we ask `jsonschema` for
the errors. `tests/lang/test_schema_parity.py` proves both give the same verdicts.
Formats are annotations in both (Draft 2020-12's default), so their verdicts agree.
"""

from __future__ import annotations

import copy
import functools
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import jsonschema

from .schema_compile import fast_validator, meta_is_valid, reference_validator, schema_uri_problem
from .schema_refs import find_refs, ref_problem, resolve_in_document


@functools.lru_cache(maxsize=4096)
def _matcher(pattern: str) -> Callable[[str], bool]:
    """Whether a text matches a schema's regex, asked of jsonschema-rs: the engine that gives the
    verdict (ECMA-262, `\\p{Letter}` and all), and not a backtracking one (Python's `re`
    takes 15 s on `^(a+)+$` against 27 characters). Compiled once per pattern."""
    return fast_validator({"pattern": pattern}).is_valid


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    if validator.is_type(instance, "string") and not _matcher(pattern)(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Any:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        matches = _matcher(pattern)
        for key, value in instance.items():
            if matches(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Any:
    """jsonschema's own, with the keys `patternProperties` matches found by `_matcher` (jsonschema
    would search them with `re`)."""
    if not validator.is_type(instance, "object"):
        return
    properties, patterns = schema.get("properties") or {}, schema.get("patternProperties") or {}
    matchers = [_matcher(pattern) for pattern in patterns]
    extras = [key for key in instance if key not in properties and not any(matches(key) for matches in matchers)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras, key=str))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            yield jsonschema.ValidationError(f"{listed} {verb} not match any of the regexes: "
                                             + ", ".join(repr(pattern) for pattern in sorted(patterns)))
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield jsonschema.ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Any:
    """jsonschema's own compares unsortable items pairwise (7 s for 3,000 objects): here each
    item gets a hashable identity, one pass."""
    if unique and validator.is_type(instance, "array"):
        seen: set[Any] = set()
        for item in instance:
            identity = _identity(item)
            if identity in seen:
                yield jsonschema.ValidationError(f"{instance!r} has non-unique elements")
                return
            seen.add(identity)


def _identity(value: Any) -> Any:
    """A hashable stand-in equal for JSON-equal values (1 == 1.0, True is not 1, key order aside)."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, dict):
        return ("object", frozenset((key, _identity(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return ("array", tuple(_identity(item) for item in value))
    return value if isinstance(value, (str, int, float)) or value is None else ("other", id(value))


# The reference validator: Draft 2020-12, its regexes matched by `_matcher`. `unevaluatedProperties`
# matches `patternProperties` with `re` inside jsonschema: a schema having both is explained by
# jsonschema-rs itself (`CompiledSchema.violations`).
Draft = jsonschema.validators.extend(jsonschema.Draft202012Validator, {
    "pattern": _pattern, "patternProperties": _pattern_properties, "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items})


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

    `$schema`s and `$ref`s are checked here first: only known drafts and local references
    (`#/$defs/…`, `#anchor`) are allowed, so no compile is asked to fetch a document (and
    `schema_compile` refuses any that would be). Regexes are checked by both validators here,
    so none fails at call time.
    """
    if not isinstance(schema, (dict, bool)):
        return [SchemaProblem((), "a JSON Schema must be a mapping (or true/false)")]
    mentioned = _mentions(schema) if type(schema) is dict else frozenset()  # most mention neither: skip the walks
    if "$schema" in mentioned and (unknown := _schema_uri_problems(schema)):
        return unknown  # before either library sees it: both would fetch an unknown one
    problems = _ref_problems(schema) if mentioned & _REF_KEYS else []
    if mentioned & _PATTERN_KEYS:
        problems += _pattern_problems(schema)
    if not problems:
        try:
            if meta_is_valid(schema):
                _remember(schema, fast_validator(schema, validate_formats=False))
                return []
        except Exception:  # noqa: BLE001 - rs refuses some inputs the reference can judge
            pass
    meta = reference_validator(Draft, Draft.META_SCHEMA)
    problems += [
        SchemaProblem(tuple(error.path), _meta_message(error))
        for error in sorted(meta.iter_errors(schema), key=lambda e: [str(p) for p in e.path])
    ]
    if problems:
        return sorted(problems, key=lambda p: [str(part) for part in p.path])
    try:
        fast_validator(schema)
    except Exception as exc:  # noqa: BLE001 - whatever else the compiler refuses
        message = str(getattr(exc, "message", None) or exc).splitlines()[0]
        problems.append(SchemaProblem(tuple(getattr(exc, "instance_path", None) or ()), message))
    return problems


_REF_KEYS = frozenset({"$ref", "$dynamicRef"})
_PATTERN_KEYS = frozenset({"pattern", "patternProperties"})
_SCANNED = _REF_KEYS | _PATTERN_KEYS | {"$schema", "unevaluatedProperties"}


def _mentions(schema: Any) -> frozenset[str]:
    """Which of the `_SCANNED` keys any mapping in the schema has, data values included. (No paths kept.)"""
    found: set[str] = set()
    stack = [schema]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if type(node) is dict:
            found.update(_SCANNED.intersection(node))
            node = node.values()
        for value in node:
            kind = type(value)
            if kind is dict or kind is list:
                push(value)
    return frozenset(found)


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


def _schema_uri_problems(schema: Any) -> list[SchemaProblem]:
    """Each `$schema` (the root's, an embedded resource's) that is not a known draft."""
    return [SchemaProblem(path + ("$schema",), why) for path, node in _walk_schemas(schema)
            if "$schema" in node and (why := schema_uri_problem(node["$schema"]))]


def _pattern_problems(schema: Any) -> list[SchemaProblem]:
    """Regexes that not both validators can compile: jsonschema-rs runs them on every call,
    Python's `re` (inside `jsonschema`) runs them again to explain a failed call."""
    problems = []
    for path, node in _walk_schemas(schema):
        patterns: list[tuple[tuple[str, ...], Any]] = [(("pattern",), node.get("pattern"))]
        if isinstance(node.get("patternProperties"), dict):
            patterns += [(("patternProperties", key), key) for key in node["patternProperties"]]
        for sub, pattern in patterns:
            if isinstance(pattern, str):
                why = regex_problem(pattern)
                if why:
                    problems.append(SchemaProblem(path + sub, why))
    return problems


def regex_problem(pattern: str) -> str | None:
    """Why `pattern` cannot be used in a schema here (None: both validators read it alike).

    jsonschema-rs must compile it (it gives every verdict and matches every explanation's
    regexes); it must also mean the same as for the reference validator `jsonschema` and other
    JSON Schema tools: Python's `re` or `regress` (ECMA-262) reads it, except a back-reference
    or an octal escape, which jsonschema-rs does not read as ECMA-262 does. (Only compiled
    here, never run on a value.)"""
    try:
        fast_validator({"pattern": pattern})
        rs_error = None
    except Exception:  # noqa: BLE001 - rs raises its own ValidationError, without a reason
        rs_error = "jsonschema-rs (ECMA-262 syntax) cannot compile it"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FutureWarning about nested sets: not our user's concern
            re.compile(pattern)
        py_error = None
    except re.error as exc:
        py_error = str(exc)
    if rs_error is None and py_error is None:
        return None
    if rs_error is None and _ecma_reads(pattern):
        return None  # the reference searches it with regress
    head = f"{pattern!r} is not a valid regular expression"
    for finder, construct, fix in _LINEAR_ONLY_HINTS if rs_error else ():
        if finder.search(pattern):
            return f"{pattern!r} cannot be used: {construct}; {fix}"
    if rs_error and py_error:
        return f"{head}: {_regress_error(pattern) or py_error}"
    for finder, construct, fix in _CONSTRUCT_HINTS:
        if finder.search(pattern):
            return f"{pattern!r} is not a regular expression both validators read: {construct}; {fix}"
    who = rs_error if rs_error else f"Python's re (the reference validator's) cannot compile it ({py_error})"
    return f"{pattern!r} is not a regular expression both validators read: {who}; use ECMA-262 syntax that Python's re also reads"


def _ecma_reads(pattern: str) -> bool:
    """Whether regress reads `pattern` as jsonschema-rs does (back-references and octal escapes
    excepted: jsonschema-rs reads a forward one differently)."""
    return not _BACK_REFERENCE.search(pattern) and _regress_error(pattern) is None


def _regress_error(pattern: str) -> str | None:
    """Why regress (ECMA-262, unicode mode) cannot read `pattern`; None when it can."""
    import regress

    try:
        regress.Regex(pattern, "u")
    except regress.RegressError as exc:
        return f"{exc} (ECMA-262)"
    return None


def _unescaped(body: str) -> re.Pattern[str]:
    """A finder for `body` (regex text starting with a backslash) that is not itself escaped."""
    return re.compile(r"(?<!\\)(?:\\\\)*" + body)


_BACK_REFERENCE = _unescaped(r"\\[0-9]")
# What the linear-time engine that runs every pattern cannot read (no text can make it backtrack).
_LINEAR_ONLY_HINTS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (_BACK_REFERENCE, "patterns are matched in linear time, which has no back-references (and an octal "
     "escape reads as one)", "write a character as \\xNN, and match a repeated part without referring back to it"),
    (_unescaped(r"\(\?<?[=!]"), "patterns are matched in linear time, which has no look-arounds ((?=…), (?!…), "
     "(?<=…), (?<!…))", "express the condition with plain alternatives and anchors, or check it in a python skill"),
)
# (finder, the construct, the fix): the usual reasons one validator reads a pattern the other refuses.
_CONSTRUCT_HINTS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (_unescaped(r"\\[pP](?!\{)"), "\\pL (a property escape without braces) is not ECMA-262", "write \\p{L}"),
    (_unescaped(r"\\[pP]\{"), "this \\p{…} names a property ECMA-262 does not know (jsonschema-rs reads it, the "
     "ECMA-262 engine that explains failed calls does not)",
     "write an ECMA-262 property: a General_Category (\\p{Letter}, \\p{Lu}) or a Script (\\p{Script=Greek})"),
    (_unescaped(r"\\u\{"), "\\u{…} (a code point escape) is ECMA-262 only", "write the character itself, or \\uXXXX for one in the BMP"),
    (_unescaped(r"\\z"), "\\z is not Python syntax", "write $ for the end of the text"),
    (_unescaped(r"\\Z"), "\\Z is Python syntax, not ECMA-262", "write $ for the end of the text"),
    (_unescaped(r"\\c[A-Za-z]"), "\\cX (a control escape) is not Python syntax", "write the control character as \\xNN"),
    (re.compile(r"\(\?>"), "(?>…) (an atomic group) is Python syntax, not ECMA-262", "use a plain group (…)"),
    (re.compile(r"\(\?#"), "(?#…) (a comment) is Python syntax, not ECMA-262", "remove the comment"),
    (re.compile(r"\{,"), "{,n} is Python syntax, not ECMA-262", "write {0,n}"),
    (_unescaped(r"\\N\{"), "\\N{name} is Python syntax, not ECMA-262", "write the character itself"),
    (_unescaped(r"(?:\{(?![0-9]+(?:,[0-9]*)?\})|\})"), "a bare { or } is a literal only in Python's re", "escape it as \\{ or \\}"),
)


def _ref_problems(schema: Any) -> list[SchemaProblem]:
    """`$ref`s and `$dynamicRef`s that point outside the schema, or to nothing inside it."""
    problems = []
    for found in sorted(find_refs(schema), key=lambda r: [str(p) for p in r.path]):
        if not found.ref.startswith("#"):
            problems.append(SchemaProblem(found.path, f"{found.path[-1]} {found.ref!r} points outside this schema; only local references are supported"))
        elif (why := ref_problem(found)) is not None:
            problems.append(SchemaProblem(found.path, why))
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
    return fast_validator(schema, validate_formats=False)


def _explainer(schema: Any, fast: Any) -> Any:
    """The validator that explains a failed verdict: the reference, unless `schema` has both
    `unevaluatedProperties` and `patternProperties` (jsonschema matches those with `re`, out of
    `Draft`'s reach): then jsonschema-rs's own errors."""
    mentioned = _mentions(schema) if type(schema) is dict else frozenset()
    if "unevaluatedProperties" in mentioned and "patternProperties" in mentioned:
        return fast
    return reference_validator(Draft, schema)


def _fast_violations(fast: Any, value: Any) -> list[Violation]:
    found = [Violation(_pointer(e.instance_path), e.message, str(e.schema_path[-1]) if e.schema_path else "schema")
             for e in fast.iter_errors(value)]
    return sorted(found, key=lambda v: (v.pointer, v.keyword))


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
        """Every error, best first within each location, sorted by JSON Pointer.

        The reference validator only explains a verdict; whatever it raises (a float it cannot
        divide) becomes a violation, never an exception. No regex of it runs on Python's `re`.
        """
        try:
            if self._reference is None:
                self._reference = _explainer(self.schema, self._fast)
            if self._reference is self._fast:
                return _fast_violations(self._fast, value)
            errors = sorted(self._reference.iter_errors(value), key=lambda e: (list(map(str, e.path)), e.validator))
        except Exception as exc:  # noqa: BLE001 - explaining must not fail the call
            return [Violation("", f"value does not match the schema (no detailed explanation: {type(exc).__name__}: {str(exc)[:200]})", "schema")]
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
        """Follow local `$ref`s (`#/$defs/x`, `#anchor`); anything else stays as it is."""
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
            schema = resolve_in_document(self.root, schema["$ref"])
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

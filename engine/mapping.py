"""The mapping language: `$toolArgs.<path>` and `$steps.<id>.output[.<path>]`.

A string that starts with `$toolArgs` or `$steps` is a reference; every other value is a
literal, and dicts and lists are walked. `$$` escapes a literal leading `$`. Paths are dotted
keys and `[n]` indexes (`["odd key"]` for keys that are not identifiers).

A mapping is compiled once (at link time) into a resolver: a closure that builds the input
from `(tool_args, step_outputs)`. An optional tool argument that was not given drops its
key; a reference that cannot resolve at run time raises `MappingError`.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal

PathPart = str | int
Resolver = Callable[[dict[str, Any], dict[str, Any]], Any]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class MappingSyntaxError(ValueError):
    """A reference is written wrongly (found at link time)."""


class MappingError(Exception):
    """A reference could not be resolved at run time."""

    def __init__(self, reference: str, reason: str):
        super().__init__(f"{reference}: {reason}")
        self.reference = reference
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Reference:
    text: str
    source: Literal["toolArgs", "steps"]
    step_id: str | None
    path: tuple[PathPart, ...]


_SEGMENT = re.compile(r'\.([A-Za-z0-9_][A-Za-z0-9_-]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')
_STEP_HEAD = re.compile(r"^\$steps\.([A-Za-z0-9_][A-Za-z0-9_-]*)")


def is_reference(value: Any) -> bool:
    return isinstance(value, str) and (value.startswith("$toolArgs") or value.startswith("$steps"))


def parse_path(text: str, start: int, whole: str) -> tuple[PathPart, ...]:
    parts: list[PathPart] = []
    pos = start
    while pos < len(text):
        match = _SEGMENT.match(text, pos)
        if not match:
            raise MappingSyntaxError(
                f"cannot read {whole!r} at {text[pos:]!r}: write keys as .name and indexes as [0]"
            )
        key, index, quoted = match.groups()
        if quoted is not None:
            try:
                key = json.loads(quoted)
            except json.JSONDecodeError as exc:
                raise MappingSyntaxError(
                    f"cannot read {whole!r}: the quoted key {quoted} is not a valid JSON string ({exc.msg})"
                ) from None
        parts.append(key if key is not None else int(index))
        pos = match.end()
    return tuple(parts)


@functools.lru_cache(maxsize=8192)
def parse_reference(text: str) -> Reference:
    """Parse a reference string; raises MappingSyntaxError with advice when it is malformed.

    Cached by text (a Reference is immutable): link reads each reference several times.
    """
    if text.startswith("$toolArgs"):
        rest = text[len("$toolArgs") :]
        if rest and rest[0] not in ".[":
            raise MappingSyntaxError(f"{text!r} is not a reference: did you mean $toolArgs.{rest}?")
        return Reference(text, "toolArgs", None, parse_path(rest, 0, text))
    head = _STEP_HEAD.match(text)
    if not head:
        raise MappingSyntaxError(f"{text!r} is not a reference: write $steps.<step-id>.output[.<path>]")
    rest = text[head.end() :]
    if not (rest == ".output" or rest.startswith(".output.") or rest.startswith(".output[")):
        raise MappingSyntaxError(f"{text!r} must continue with .output, as in $steps.{head.group(1)}.output")
    return Reference(text, "steps", head.group(1), parse_path(rest, len(".output"), text))


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


def format_path(path: tuple[PathPart, ...]) -> str:
    """The path as written in a reference: `.key`, `[0]`, `["odd key"]`."""
    return "".join(
        f"[{p}]" if isinstance(p, int) else f".{p}" if _PLAIN_KEY.fullmatch(p) else f"[{json.dumps(p)}]" for p in path
    )


def unescape(value: str) -> str:
    return value[1:] if value.startswith("$$") else value


def iter_references(mapping: Any, where: tuple[PathPart, ...] = ()) -> Iterator[tuple[tuple[PathPart, ...], str]]:
    """Every reference string in a mapping, with its position inside the mapping."""
    stack: list[tuple[Any, tuple[PathPart, ...]]] = [(mapping, where)]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if is_reference(value):
                yield path, value
        elif isinstance(value, dict):
            stack.extend((v, path + (k,)) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((v, path + (i,)) for i, v in reversed(list(enumerate(value))))


def mapping_is_clean(mapping: Any, source_clean: Callable[[Reference], bool], key_ok: Callable[[str], bool]) -> bool:
    """True when every value the mapping can build is free of sensitive keys.

    `source_clean(reference)` judges where a reference reads from (a clean value's parts are
    clean too); `key_ok(key)` judges the mapping's own literal keys. Decided at link time.
    """
    if isinstance(mapping, str):
        return source_clean(parse_reference(mapping)) if is_reference(mapping) else True
    if isinstance(mapping, dict):
        return all(key_ok(key) and mapping_is_clean(value, source_clean, key_ok) for key, value in mapping.items())
    if isinstance(mapping, list):
        return all(mapping_is_clean(value, source_clean, key_ok) for value in mapping)
    return True


# ─── compilation ────────────────────────────────────────────────────────────────────────


def compile_mapping(mapping: Any) -> Resolver:
    """Build the resolver of a mapping. Raises MappingSyntaxError for malformed references."""
    if isinstance(mapping, str):
        if is_reference(mapping):
            return _compile_reference(parse_reference(mapping))
        literal = unescape(mapping)
        return lambda args, outputs: literal
    if isinstance(mapping, dict):
        items = [(key, compile_mapping(value)) for key, value in mapping.items()]

        def build_dict(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
            out = {}
            for key, resolve in items:
                value = resolve(args, outputs)
                if value is not MISSING:
                    out[key] = value
            return out

        return build_dict
    if isinstance(mapping, list):
        elements = [compile_mapping(value) for value in mapping]

        def build_list(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
            out = []
            for resolve in elements:
                value = resolve(args, outputs)
                if value is not MISSING:
                    out.append(value)
            return out

        return build_list
    return lambda args, outputs: mapping


def _compile_reference(ref: Reference) -> Resolver:
    path = ref.path
    if ref.source == "toolArgs":
        if not path:
            return lambda args, outputs: args

        def from_args(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
            node: Any = args
            for part in path:
                node = _child(node, part)
                if node is MISSING:
                    return MISSING  # an optional argument that was not given
            return node

        if not all(isinstance(part, str) for part in path):
            return from_args

        def from_args_keys(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
            node: Any = args
            for key in path:  # keys through plain dicts: lookups, no call per part
                if type(node) is not dict:
                    return from_args(args, outputs)
                node = node.get(key, MISSING)
                if node is MISSING:
                    return MISSING
            return node

        return from_args_keys

    step_id = ref.step_id

    def from_step(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
        try:
            node = outputs[step_id]
        except KeyError:
            raise MappingError(ref.text, f"step {step_id!r} has not produced an output") from None
        for depth, part in enumerate(path):
            child = _child(node, part)
            if child is MISSING:
                raise MappingError(ref.text, _why_missing(node, path[:depth], part))
            node = child
        return node

    if not path or not all(isinstance(part, str) for part in path):
        return from_step

    def from_step_keys(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
        node = outputs.get(step_id)
        for key in path:  # keys through plain dicts: lookups, no call per part
            if type(node) is not dict:
                return from_step(args, outputs)  # the general walk explains what is missing
            node = node.get(key, MISSING)
            if node is MISSING:
                return from_step(args, outputs)
        return node

    return from_step_keys


def _child(node: Any, part: PathPart) -> Any:
    """One path step: a key of an object or an index of a list (never a character of a string)."""
    if isinstance(part, int):
        if isinstance(node, (list, tuple)) and part < len(node):
            return node[part]
        return MISSING
    if isinstance(node, dict):
        return node.get(part, MISSING)
    return MISSING


def _why_missing(node: Any, before: tuple[PathPart, ...], part: PathPart) -> str:
    where = "output" + format_path(before)
    if isinstance(part, int):
        if isinstance(node, (list, tuple)):
            return f"{where} has {len(node)} items, no index {part}"
        return f"{where} is {type(node).__name__}, not a list"
    if isinstance(node, dict):
        return f"{where} has no key {part!r}"
    return f"{where} is {type(node).__name__}, not an object"

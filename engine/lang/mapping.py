"""The mapping language: `$toolArgs.<path>`, `$steps.<id>.output[.<path>]`, `$item[.<path>]`, `$index`.

A string that starts with `$toolArgs`, `$steps`, `$item` or `$index` is a reference (or a
fallback chain `<reference> ?? <reference or JSON literal> …`); every other value is a
literal, and dicts and lists are walked. `$$` escapes a literal leading `$`. Paths are dotted
keys and `[n]` indexes (`["odd key"]` for keys that are not identifiers).

A mapping is compiled once (at link time) into a resolver: a closure that builds the input
from `(tool_args, step_outputs)`. An optional tool argument that was not given drops its
key; a reference that cannot resolve at run time raises `MappingError`, except a reference
to a step that may have been skipped (`when`), which is absent (MISSING) when it was. Inside
a `forEach` step the current item and its index sit in the outputs under ITEM and INDEX; an
`$item` path reads like an argument (a missing optional key drops out).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal

from ..errors import MappingError, MappingSyntaxError  # noqa: F401 - raised here, defined with the error tree

PathPart = str | int
Resolver = Callable[[dict[str, Any], dict[str, Any]], Any]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
ITEM = "$item"  # where a forEach step's current item sits among the outputs (not a valid step id)
INDEX = "$index"


@dataclass(frozen=True, slots=True)
class Reference:
    text: str
    source: Literal["toolArgs", "steps", "item", "index"]
    step_id: str | None
    path: tuple[PathPart, ...]


@dataclass(frozen=True, slots=True)
class Fallback:
    """`a ?? b ?? literal`: the first operand that is present. Operands: Reference or a JSON literal."""

    text: str
    operands: tuple[Any, ...]

    @property
    def references(self) -> list[Reference]:
        return [op for op in self.operands if isinstance(op, Reference)]


_SEGMENT = re.compile(r'\.([A-Za-z0-9_][A-Za-z0-9_-]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')
_STEP_HEAD = re.compile(r"^\$steps\.([A-Za-z0-9_][A-Za-z0-9_-]*)")


_HEADS = ("$toolArgs", "$steps", "$item", "$index")


def is_reference(value: Any) -> bool:
    """A reference or a fallback chain (both start with a reference head)."""
    return isinstance(value, str) and value.startswith(_HEADS)


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
    if "??" in text:
        raise MappingSyntaxError(f"{text!r} is a fallback chain, not one reference")
    if text.startswith("$toolArgs"):
        rest = text[len("$toolArgs") :]
        if rest and rest[0] not in ".[":
            raise MappingSyntaxError(f"{text!r} is not a reference: did you mean $toolArgs.{rest}?")
        return Reference(text, "toolArgs", None, parse_path(rest, 0, text))
    if text.startswith("$item"):
        rest = text[len("$item") :]
        if rest and rest[0] not in ".[":
            raise MappingSyntaxError(f"{text!r} is not a reference: write $item or $item.<path> (the current forEach item)")
        return Reference(text, "item", None, parse_path(rest, 0, text))
    if text.startswith("$index"):
        if text != "$index":
            raise MappingSyntaxError(f"{text!r} is not a reference: $index (the current item's position) has no path")
        return Reference(text, "index", None, ())
    head = _STEP_HEAD.match(text)
    if not head:
        raise MappingSyntaxError(f"{text!r} is not a reference: write $steps.<step-id>.output[.<path>]")
    rest = text[head.end() :]
    if not (rest == ".output" or rest.startswith(".output.") or rest.startswith(".output[")):
        raise MappingSyntaxError(f"{text!r} must continue with .output, as in $steps.{head.group(1)}.output")
    return Reference(text, "steps", head.group(1), parse_path(rest, len(".output"), text))


@functools.lru_cache(maxsize=4096)
def parse_value(text: str) -> Reference | Fallback:
    """A reference, or a `??` chain of references ending, maybe, in one JSON literal."""
    if "??" not in text:
        return parse_reference(text)
    parts = [part.strip() for part in _split_fallback(text)]
    operands: list[Any] = []
    for position, part in enumerate(parts):
        if not part:
            raise MappingSyntaxError(f"{text!r}: `??` needs a value on both sides")
        if is_reference(part):
            operands.append(parse_reference(part))
            continue
        if position < len(parts) - 1:
            raise MappingSyntaxError(f"{text!r}: only the last value of a `??` chain may be a literal ({part!r} is not a reference)")
        try:
            operands.append(json.loads(part))
        except json.JSONDecodeError:
            raise MappingSyntaxError(
                f"{text!r}: the fallback {part!r} is neither a reference nor a JSON literal; write strings in double quotes, as in ?? \"none\""
            ) from None
    return Fallback(text, tuple(operands))


def _split_fallback(text: str) -> list[str]:
    """Split at top-level `??` (not inside a double-quoted string)."""
    parts, start, quoted, pos = [], 0, False, 0
    while pos < len(text):
        char = text[pos]
        if quoted and char == "\\":
            pos += 2
            continue
        if char == '"':
            quoted = not quoted
        elif not quoted and text.startswith("??", pos):
            parts.append(text[start:pos])
            pos += 2
            start = pos
            continue
        pos += 1
    parts.append(text[start:])
    return parts


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
        if not is_reference(mapping):
            return True
        parsed = parse_value(mapping)
        if isinstance(parsed, Reference):
            return source_clean(parsed)
        return all(source_clean(op) if isinstance(op, Reference) else mapping_is_clean(op, source_clean, key_ok)
                   for op in parsed.operands)
    if isinstance(mapping, dict):
        return all(key_ok(key) and mapping_is_clean(value, source_clean, key_ok) for key, value in mapping.items())
    if isinstance(mapping, list):
        return all(mapping_is_clean(value, source_clean, key_ok) for value in mapping)
    return True


# ─── compilation ────────────────────────────────────────────────────────────────────────


def compile_mapping(mapping: Any, skippable: frozenset[str] = frozenset()) -> Resolver:
    """Build the resolver of a mapping. Raises MappingSyntaxError for malformed references.

    `skippable`: ids of steps that may be skipped; a reference to one is absent when it was.
    """
    if isinstance(mapping, str):
        if is_reference(mapping):
            parsed = parse_value(mapping)
            if isinstance(parsed, Fallback):
                return _compile_fallback(parsed)
            return compile_reference(parsed, parsed.step_id in skippable)
        literal = unescape(mapping)
        return lambda args, outputs: literal
    if isinstance(mapping, dict):
        items = [(key, compile_mapping(value, skippable)) for key, value in mapping.items()]

        def build_dict(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
            out = {}
            for key, resolve in items:
                value = resolve(args, outputs)
                if value is not MISSING:
                    out[key] = value
            return out

        return build_dict
    if isinstance(mapping, list):
        elements = [compile_mapping(value, skippable) for value in mapping]

        def build_list(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
            out = []
            for resolve in elements:
                value = resolve(args, outputs)
                if value is not MISSING:
                    out.append(value)
            return out

        return build_list
    return lambda args, outputs: mapping


def _compile_fallback(fallback: Fallback) -> Resolver:
    """The first operand that resolves to a present value (a missing path counts as absent)."""
    operands = [(compile_reference(op, True), True) if isinstance(op, Reference) else (op, False) for op in fallback.operands]

    def first_present(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
        for operand, is_ref in operands:
            if not is_ref:
                return operand
            try:
                value = operand(args, outputs)
            except MappingError:
                continue
            if value is not MISSING:
                return value
        return MISSING

    return first_present


def compile_reference(ref: Reference, absent_ok: bool = False) -> Resolver:
    """The resolver of one reference. `absent_ok`: a step without an output gives MISSING."""
    path = ref.path
    if ref.source == "index":
        return lambda args, outputs: outputs[INDEX]
    if ref.source == "item":  # read like an argument: an optional key that is missing drops out
        from_item = compile_reference(Reference(ref.text, "toolArgs", None, path))
        return lambda args, outputs: from_item(outputs[ITEM], outputs)
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
    assert step_id is not None  # the source is `steps`: the reference names its step

    def from_step(args: dict[str, Any], outputs: dict[str, Any]) -> Any:
        try:
            node = outputs[step_id]
        except KeyError:
            if absent_ok:
                return MISSING  # the step was skipped (its `when` did not hold)
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

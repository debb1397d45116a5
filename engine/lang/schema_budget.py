"""The door every schema from outside passes: a caller's `output_schema`, an MCP server's tool
`inputSchema` or elicitation `requestedSchema`.

Such a schema is untrusted input: before it is compiled (and before the mock model fills it,
or a model provider is sent it) it must fit a budget — its size in bytes
(`limits.max_schema_bytes`), how deep it nests, and how far it grows once its `$ref`s are
followed (ten `$ref`s per level, six levels deep is 2.8 KB written and a million nodes
followed) — and then be a valid schema (`schema_problems`: known `$schema` drafts, local
`$ref`s only, regexes both validators read). Operator-written YAML schemas are trusted and
checked by `schema_problems` alone.
"""

from __future__ import annotations

import json
from typing import Any

from .schema import schema_problems
from .schema_refs import resolve_in_document

DEFAULT_MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 64  # nested objects and arrays
MAX_SCHEMA_EXPANSION = 100_000  # schema nodes once every $ref is followed (a recursive one once)


def untrusted_schema_problems(schema: Any, max_bytes: int = DEFAULT_MAX_SCHEMA_BYTES) -> list[str]:
    """Why a schema from outside is refused: over a budget (the message names the limit), or
    not a valid JSON Schema. Empty list: it may be compiled and used."""
    over = schema_over_budget(schema, max_bytes)
    if over is not None:
        return [over]
    return [f"not a valid JSON Schema: {problem}" for problem in schema_problems(schema)]


def schema_over_budget(schema: Any, max_bytes: int = DEFAULT_MAX_SCHEMA_BYTES) -> str | None:
    """Which budget `schema` is over, said with the limit's name (None: within all three)."""
    deep = _too_deep(schema)
    if deep is not None:
        return (f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels (at {deep[:80] + '…' if len(deep) > 80 else deep}); "
                f"the schema depth limit is {MAX_SCHEMA_DEPTH}")
    try:
        size = len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError) as exc:
        return f"the schema is not JSON data: {exc}"
    if size > max_bytes:
        return (f"the schema is {size:,} bytes, more than limits.max_schema_bytes ({max_bytes:,}); "
                "send a smaller schema (the operator may raise limits.max_schema_bytes in config/engine.yaml)")
    if _expands_past(schema, MAX_SCHEMA_EXPANSION):
        return (f"the schema grows past {MAX_SCHEMA_EXPANSION:,} nodes once its $refs are followed "
                f"(the $ref fan-out limit, {MAX_SCHEMA_EXPANSION:,}); refer to fewer definitions per level")
    return None


def _too_deep(schema: Any) -> str | None:
    """The JSON Pointer of a node nested past `MAX_SCHEMA_DEPTH`, or None. Iterative: no recursion
    limit is reached on a hostile nesting."""
    stack: list[tuple[Any, int, str]] = [(schema, 0, "")]
    while stack:
        node, depth, where = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            return where or "/"
        if isinstance(node, dict):
            stack.extend((value, depth + 1, f"{where}/{_escape(key)}") for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, depth + 1, f"{where}/{index}") for index, value in enumerate(node))
    return None


def _escape(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _expands_past(schema: Any, most: int) -> bool:
    """Whether `schema` grows past `most` nodes when each local `$ref` is replaced by what it
    names (a recursion counts once). Each target is walked once, so this costs the size of the
    schema, not of its expansion."""
    local, refs = _walk(schema)
    expanded: dict[str, int] = {}
    opened: set[str] = set()
    walked: dict[str, tuple[int, list[str]]] = {}
    stack = list(dict.fromkeys(refs))
    while stack:
        ref = stack[-1]
        if ref in expanded:
            stack.pop()
            continue
        if ref not in walked:
            walked[ref] = _walk(resolve_in_document(schema, ref))
        size, inner = walked[ref]
        if ref not in opened:
            opened.add(ref)
            stack.extend(r for r in dict.fromkeys(inner) if r not in expanded and r not in opened)
            continue
        # every inner target is expanded now, or is being expanded around this one (a recursion: 0)
        expanded[ref] = min(most + 1, size + sum(expanded.get(r, 0) for r in inner))
        stack.pop()
    return local + sum(expanded[r] for r in refs) > most


def _walk(node: Any) -> tuple[int, list[str]]:
    """How many nodes `node` holds, and the local references in it (each time it is written)."""
    count, refs, stack = 0, list[str](), [node]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            refs.extend(ref for key in ("$ref", "$dynamicRef") if isinstance(ref := item.get(key), str) and ref.startswith("#"))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count, refs

"""Local references inside one JSON Schema, resolved statically the way both validators do.

A `$ref` (or `$dynamicRef`) that starts with `#` names a place in the same document:

- `#/a/b/0` is an RFC 6901 JSON Pointer carried in a URI fragment: the fragment is
  percent-decoded first (`%25` → `%`), then split on `/`; in each token `~1` means `/` and
  `~0` means `~`; an empty token is the key `""`; an array is indexed by `0` or a decimal
  without a leading zero (`-` names no element, so it is refused).
- `#name` is a plain-name fragment: a `$anchor` or `$dynamicAnchor` (Draft 2020-12 lets a
  `$ref` land on either) in the same schema resource.

A schema resource is the document root or any sub-schema with its own string `$id`; a
fragment is resolved inside the resource that holds the reference. References that do not
start with `#` are refused by `schema.py`, so a schema never reaches out to the network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

Path = tuple[str | int, ...]
REF_KEYWORDS = ("$ref", "$dynamicRef")
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})  # values, not schemas
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
_BAD_TILDE = re.compile(r"~(?![01])")


@dataclass(slots=True)
class Resource:
    """One schema resource: its root node and the anchors declared inside it."""

    root: Any
    anchors: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class LocalRef:
    """A reference found in a schema: where it is, what it says, the resource it lives in."""

    path: Path  # path of the `$ref` key itself, e.g. ("properties", "a", "$ref")
    ref: str
    resource: Resource


def find_refs(schema: Any) -> list[LocalRef]:
    """Every `$ref`/`$dynamicRef` string in `schema` (data values skipped), with its resource."""
    document = Resource(schema)
    found: list[LocalRef] = []
    stack: list[tuple[Any, Path, Resource]] = [(schema, (), document)]
    while stack:
        node, path, resource = stack.pop()
        if isinstance(node, dict):
            if path and isinstance(node.get("$id"), str):
                resource = Resource(node)
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(key), str):
                    resource.anchors.add(node[key])
            found.extend(LocalRef(path + (k,), node[k], resource) for k in REF_KEYWORDS if isinstance(node.get(k), str))
            stack.extend((v, path + (k,), resource) for k, v in node.items() if k not in _DATA_KEYWORDS)
        elif isinstance(node, list):
            stack.extend((v, path + (i,), resource) for i, v in enumerate(node))
    return found


def ref_problem(ref: LocalRef) -> str | None:
    """Why `ref` cannot be followed inside its schema, or None when it can."""
    text, keyword = ref.ref, ref.path[-1]
    if not text.startswith("#"):
        return None  # the caller refuses non-local references with its own message
    fragment = text[1:]
    if fragment and not fragment.startswith("/"):
        if fragment in ref.resource.anchors:
            return None
        return f"{keyword} {text!r} names no $anchor or $dynamicAnchor in this schema resource"
    found, why = follow_pointer(ref.resource.root, fragment)
    return None if why is None else f"{keyword} {text!r} points to nothing in this schema: {why}"


def follow_pointer(root: Any, fragment: str) -> tuple[Any, str | None]:
    """(node, None) at the JSON Pointer in URI fragment `fragment` ('' or '/a/b'), or (None, why)."""
    pointer = unquote(fragment)
    if pointer == "":
        return root, None
    node = root
    walked = ""
    for raw in pointer.split("/")[1:]:
        if _BAD_TILDE.search(raw):
            return None, f"{raw!r} has a '~' that is not '~0' or '~1' (RFC 6901 escapes)"
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            if token not in node:
                return None, f"{walked or '/'} has no key {token!r}"
            node = node[token]
        elif isinstance(node, list):
            if not _ARRAY_INDEX.fullmatch(token):
                return None, f"{token!r} is not an array index of {walked or '/'} (write 0, 1, 2… without leading zeros)"
            if int(token) >= len(node):
                return None, f"{walked or '/'} has {len(node)} item(s), no index {token}"
            node = node[int(token)]
        else:
            return None, f"{walked or '/'} is neither an object nor an array"
        walked += "/" + raw
    return node, None


def resolve_in_document(root: Any, ref: str) -> Any:
    """The node a local `#…` reference names in the document `root` (None when it names none).

    Used by link-time data-flow reading, which only needs the answer for refs that
    `schema_problem_details` already accepted; anchors are looked up across the document.
    """
    if not ref.startswith("#"):
        return None
    fragment = ref[1:]
    if fragment == "" or fragment.startswith("/"):
        return follow_pointer(root, fragment)[0]
    for found in find_anchor(root, fragment):
        return found
    return None


def find_anchor(root: Any, name: str) -> list[Any]:
    """Sub-schemas of `root` whose `$anchor` or `$dynamicAnchor` is `name`."""
    hits = []
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("$anchor") == name or node.get("$dynamicAnchor") == name:
                hits.append(node)
            stack.extend(v for k, v in node.items() if k not in _DATA_KEYWORDS)
        elif isinstance(node, list):
            stack.extend(node)
    return hits

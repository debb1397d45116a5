"""The full YAML builder: plain data and the position of every value, from PyYAML's events.

In one pass and without recursion: only the core tags, duplicate keys and anchors refused,
aliases counted before they are copied, nesting and size bounded as the events arrive (see
yaml_source.py, which uses it for every file that is not plain maps, lists and scalars, and
to find positions when a problem needs one). It records positions into the `Positions` it is
given (a SourceMap).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import yaml

from ..errors import YamlLoadError

MAX_DEPTH = 64
MAX_NODES = 1_000_000
# Values that aliases may add beyond the ones written out (shared schemas need a few hundred).
MAX_ALIAS_EXPANSION = 100_000

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

YamlPath = tuple[str | int, ...]

STR_TAG = "tag:yaml.org,2002:str"
SCALAR_TAGS = {
    STR_TAG,
    "tag:yaml.org,2002:merge",  # only meaningful as a key: `<<`
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:timestamp",  # kept as the original text: JSON has no dates
}
MAP_TAG = "tag:yaml.org,2002:map"
SEQ_TAG = "tag:yaml.org,2002:seq"
MERGE_TAG = "tag:yaml.org,2002:merge"
TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MERGE_KEY: Any = type("_MergeKey", (), {"__repr__": lambda self: "<<"})()


class Mark(NamedTuple):
    """A value's position (a tuple: cheap to make by the hundred thousand)."""

    line: int  # 1-based
    col: int  # 1-based
    style: str | None = None  # scalar style: '|', '>', '"', "'" or None
    end_line: int = 0  # 1-based line where the value ends (0: unknown)


class Positions(Protocol):
    """Where the builder records positions (yaml_source.SourceMap)."""

    values: dict[YamlPath, Mark]  # value path → Mark
    keys: dict[YamlPath, Mark]  # key path → Mark
    aliases: dict[YamlPath, YamlPath]  # alias copy path → anchored path


def events(text: str) -> Any:
    """The parser's events, pulled straight from the (C) loader."""
    loader = LOADER(text)
    try:
        while True:
            event = loader.get_event()
            if event is None or type(event) is yaml.StreamEndEvent:
                return
            yield event
    finally:
        loader.dispose()


def _key_text(key: Any) -> str:
    """Mapping keys become strings as JSON would spell them (true, null, 1)."""
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


_RESOLVERS = yaml.resolver.Resolver.yaml_implicit_resolvers
_CONSTRUCT = yaml.constructor.SafeConstructor.yaml_constructors
_CONSTRUCTOR = yaml.constructor.SafeConstructor()  # its int/float/bool/null constructors keep no state
MISSING: Any = object()


def construct_scalar(tag: str, text: str) -> Any:
    """The value of a plain scalar of an int, float, bool or null tag (PyYAML's safe constructors)."""
    return _CONSTRUCT[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, text))


def resolve_scalar(value: str, implicit: tuple[bool, bool]) -> str:
    """The tag of an untagged scalar, as PyYAML's resolver decides it (plain → int, bool…)."""
    if not implicit[0]:
        return STR_TAG
    tag = _RESOLVED.get(value)
    if tag is None:
        tag = STR_TAG
        for candidate, regexp in _RESOLVERS.get(value[:1], ()) if value else _RESOLVERS.get("", ()):
            if regexp.match(value):
                tag = candidate
                break
        if len(_RESOLVED) < 100_000 and len(value) < 64:
            _RESOLVED[value] = tag  # project files repeat the same words (type, string, object…)
    return tag


_RESOLVED: dict[str, str] = {}


@dataclass(slots=True)
class _Anchor:
    value: Any
    path: YamlPath  # where the anchored value was written (positions live there)
    mark: Mark
    size: int  # values inside, counting itself
    height: int  # nesting levels inside (0: a scalar)


@dataclass(slots=True)
class _Frame:
    """An open mapping or sequence while its events stream in."""

    value: Any  # dict or list being filled
    path: YamlPath
    mark: Mark
    anchor: str | None
    count_start: int  # values built before this frame started
    height: int = 1
    key: Any = MISSING  # mapping: the key waiting for its value
    merges: list[tuple[Any, YamlPath]] = field(default_factory=list)  # `<<` sources and their paths


class Builder:
    """Builds plain data straight from the parser's events, in one pass, with no recursion.

    Depth, value count and alias expansion are checked as the events arrive, so a deep or
    exploding document stops at the first event past a limit. An alias is counted before
    it is copied, and its positions are not copied at all: the SourceMap redirects paths
    inside the copy to the anchored text.
    """

    def __init__(self, source: Positions, fail: Any):
        self.source = source
        self.fail = fail
        self.stack: list[_Frame] = []
        self.anchors: dict[str, _Anchor] = {}
        self.open_anchors: set[str] = set()
        self.count = 0  # values built so far, alias copies included
        self.alias_added = 0
        self.root: Any = MISSING
        self.list_merges: dict[int, list[tuple[Any, YamlPath]]] = {}

    # ─── events ───────────────────────────────────────────────────────────────────────

    def build(self, events: Any) -> Any:
        documents = 0
        for event in events:
            kind = type(event)
            if kind is yaml.ScalarEvent:
                self._scalar(event)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                self._start(event, kind is yaml.MappingStartEvent)
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                self._end()
            elif kind is yaml.AliasEvent:
                self._alias(event)
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    mark = mark_of(event)
                    raise self.fail(
                        "YAML syntax error: found a second document (a skillyard file holds one)",
                        "remove the `---` separator and everything after it, or move it to its own file",
                        mark.line,
                        mark.col,
                    )
        return None if self.root is MISSING else self.root

    def _scalar(self, event: yaml.ScalarEvent) -> None:
        tag = event.tag
        if tag is None or tag == "!":
            tag = resolve_scalar(event.value, event.implicit)
        mark = mark_of(event, event.style or None)
        if tag not in SCALAR_TAGS:
            raise self._bad_tag(tag, mark)
        if tag == STR_TAG or tag == TIMESTAMP_TAG:
            value: Any = event.value
        elif tag == MERGE_TAG:
            value = _MERGE_KEY
        elif self._expects_key():
            value = event.value  # a key is a name: `off:` stays "off", not YAML 1.1's false
        else:
            value = construct_scalar(tag, event.value)
        if event.anchor is not None:
            self._define(event.anchor, mark)
        self._count(mark)
        path = self._place(mark, value)
        if event.anchor is not None:
            self.anchors[event.anchor] = _Anchor(value, path if path is not None else (), mark, 1, 0)
            self.open_anchors.discard(event.anchor)

    def _expects_key(self) -> bool:
        """Is the next scalar a mapping key (not a value, an item or the document)?"""
        if not self.stack:
            return False
        frame = self.stack[-1]
        return type(frame.value) is not list and frame.key is MISSING

    def _start(self, event: Any, is_map: bool) -> None:
        mark = mark_of(event)
        tag = event.tag
        if tag not in (None, "!", MAP_TAG if is_map else SEQ_TAG):
            raise self._bad_tag(tag, mark)
        if len(self.stack) >= MAX_DEPTH:
            raise self.fail(
                f"nesting is deeper than {MAX_DEPTH} levels",
                "flatten the structure; deep nesting is not needed in skillyard files",
                mark.line,
                mark.col,
            )
        path = self._child_path(mark)
        if event.anchor is not None:
            self._define(event.anchor, mark)
        self._count(mark)
        self.source.values[path] = mark
        self.stack.append(_Frame({} if is_map else [], path, mark, event.anchor, self.count - 1))

    def _end(self) -> None:
        frame = self.stack.pop()
        if frame.merges:
            if isinstance(frame.value, dict):
                self._apply_merges(frame)
            else:  # `<<: [*a, *b]`: the mapping that owns the `<<` takes them
                self.list_merges[id(frame.value)] = frame.merges
        if frame.anchor is not None:
            self.anchors[frame.anchor] = _Anchor(frame.value, frame.path, frame.mark, self.count - frame.count_start, frame.height)
            self.open_anchors.discard(frame.anchor)
        self._attach(frame.value, frame.path, frame.height)

    def _alias(self, event: yaml.AliasEvent) -> None:
        mark = mark_of(event)
        name = event.anchor or ""  # the parser gives every alias its name
        if name in self.open_anchors:
            raise self.fail(
                f"alias *{name} is used inside the collection it names (recursive alias)",
                "remove the alias, or copy the value out",
                mark.line,
                mark.col,
            )
        anchor = self.anchors.get(name)
        if anchor is None:
            raise self.fail(
                f"YAML syntax error: found undefined alias *{name}",
                "define the anchor (&name) before using the alias (*name)",
                mark.line,
                mark.col,
            )
        self.alias_added += anchor.size
        self.count += anchor.size
        if self.count > MAX_NODES or self.alias_added > MAX_ALIAS_EXPANSION:
            if self.alias_added > MAX_ALIAS_EXPANSION:
                what = f"aliases add more than {MAX_ALIAS_EXPANSION:,} values to this document"
            else:
                what = f"aliases expand this document to more than {MAX_NODES:,} values"
            raise self.fail(
                f"{what}: *{name} here copies {anchor.size:,} values (anchored at line {anchor.mark.line})",
                "remove the alias chain that multiplies the document (a 'billion laughs' pattern)",
                mark.line,
                mark.col,
            )
        if len(self.stack) + anchor.height > MAX_DEPTH:
            raise self.fail(
                f"alias *{name} nests this document deeper than {MAX_DEPTH} levels",
                "flatten the structure; deep nesting is not needed in skillyard files",
                mark.line,
                mark.col,
            )
        if anchor.height == 0:  # a scalar: may be a key
            self._place(mark, anchor.value)
            return
        path = self._child_path(mark)
        self.source.values[path] = mark
        self.source.aliases[path] = anchor.path
        self._attach(_copy(anchor.value), path, anchor.height)

    # ─── placing values ───────────────────────────────────────────────────────────────

    def _child_path(self, mark: Mark) -> YamlPath:
        """The path a collection starting now will have; refuses collections as keys."""
        if not self.stack:
            return ()
        frame = self.stack[-1]
        if type(frame.value) is list:
            return frame.path + (len(frame.value),)
        if frame.key is MISSING:
            raise self.fail("mapping keys must be plain scalars", "use a string as the key", mark.line, mark.col)
        return frame.path + ((frame.key,) if frame.key is not _MERGE_KEY else ("<<",))

    def _place(self, mark: Mark, value: Any) -> YamlPath | None:
        """Put a scalar where it belongs: as a key, a mapping value, an item or the root."""
        if not self.stack:
            self.root = value
            self.source.values[()] = mark
            return ()
        frame = self.stack[-1]
        if type(frame.value) is list:
            path = frame.path + (len(frame.value),)
            self.source.values[path] = mark
            self._attach(value, path, 0)
            return path
        if frame.key is MISSING:  # this scalar is a key
            if value is _MERGE_KEY:
                frame.key = _MERGE_KEY
                return None
            key = _key_text(value)
            path = frame.path + (key,)
            if key in frame.value:
                first = self.source.keys.get(path)
                where = f" (first defined at line {first.line})" if first else ""
                raise self.fail(f"duplicate key {key!r}{where}", "remove or rename one of them", mark.line, mark.col)
            frame.key = key
            self.source.keys[path] = mark
            return None
        path = self._child_path(mark)
        self.source.values[path] = mark
        self._attach(value, path, 0)
        return path

    def _attach(self, value: Any, path: YamlPath, height: int) -> None:
        """Put a finished value in its place in the open collection (or make it the document)."""
        if not self.stack:
            self.root = value
            return
        frame = self.stack[-1]
        if height >= frame.height:
            frame.height = height + 1
        if type(frame.value) is list:
            frame.value.append(value)
            if len(self.stack) >= 2 and self.stack[-2].key is _MERGE_KEY:
                frame.merges.append((value, path))
            return
        key = frame.key
        frame.key = MISSING
        if key is _MERGE_KEY:
            self._merge_value(frame, value, path)
        else:
            frame.value[key] = value

    def _merge_value(self, frame: _Frame, value: Any, path: YamlPath) -> None:
        if isinstance(value, dict):
            frame.merges.append((value, path))
            return
        if isinstance(value, list):
            # the sequence collected its items (with their paths) as merge sources
            sources = self.list_merges.pop(id(value), [])
            if value and len(sources) == len(value) and all(isinstance(v, dict) for v, _ in sources):
                frame.merges.extend(sources)
                return
        mark = self.source.values.get(path) or frame.mark
        raise self.fail("a `<<` merge needs a mapping", "merge an anchored mapping (`<<: *name`) or a list of them", mark.line, mark.col)

    def _apply_merges(self, frame: _Frame) -> None:
        """`<<` keys: merged mappings first (earlier ones win), then the mapping's own keys."""
        own = frame.value
        merged: dict[str, Any] = {}
        for source, path in frame.merges:
            for key, value in source.items():
                if key in own or key in merged:
                    continue
                merged[key] = value
                self.source.aliases[frame.path + (key,)] = path + (key,)
        if merged:
            merged.update(own)
            own.clear()
            own.update(merged)

    # ─── bookkeeping ──────────────────────────────────────────────────────────────────

    def _count(self, mark: Mark) -> None:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(
                f"document holds more than {MAX_NODES:,} values",
                "split it into a tools/, skills/ or workflows/ directory of smaller files",
                mark.line,
                mark.col,
            )

    def _define(self, name: str, mark: Mark) -> None:
        if name in self.anchors or name in self.open_anchors:
            first = self.anchors[name].mark if name in self.anchors else None
            where = f" (first at line {first.line})" if first else ""
            raise self.fail(f"YAML syntax error: found duplicate anchor &{name}{where}", "give each anchor its own name", mark.line, mark.col)
        self.open_anchors.add(name)

    def _bad_tag(self, tag: str, mark: Mark) -> YamlLoadError:
        shown = "!!" + tag[len("tag:yaml.org,2002:") :] if tag.startswith("tag:yaml.org,2002:") else tag
        if shown.startswith("!!python/"):
            hint = "Python tags could run code, so skillyard never constructs them; write plain data"
        else:
            hint = "skillyard reads plain YAML data only (maps, lists, strings, numbers, booleans, null); remove the tag"
        return self.fail(f"YAML tag {shown} is not allowed", hint, mark.line, mark.col)


def _copy(value: Any) -> Any:
    """A fresh copy of plain data (an alias must not share containers with its anchor).
    Recursion is bounded: aliases are refused when they would nest deeper than MAX_DEPTH."""
    if type(value) is dict:
        return {key: _copy(item) for key, item in value.items()}
    if type(value) is list:
        return [_copy(item) for item in value]
    return value


def mark_of(event: Any, style: str | None = None) -> Mark:
    start, end = event.start_mark, event.end_mark
    return Mark(start.line + 1, start.column + 1, style, end.line + 1)

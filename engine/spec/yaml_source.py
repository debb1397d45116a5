"""Safe YAML loading that remembers where every value came from.

PyYAML's composer gives nodes with marks; we turn nodes into plain JSON-like data ourselves,
iteratively, so that:

* only the YAML core tags are accepted (no `!!python/...`, no custom tags);
* duplicate keys are an error, not a silent overwrite;
* aliases cannot expand past a node budget (billion laughs fails fast, with little memory);
* nesting deeper than a limit is a clean error, checked on the event stream *before*
  the recursive composer runs (10,000 levels never reaches a RecursionError);
* every value's position is kept in a `SourceMap` keyed by its YAML path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigIssue, Location

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 1_000_000

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALAR = yaml.constructor.SafeConstructor()

YamlPath = tuple[str | int, ...]

_STR = "tag:yaml.org,2002:str"
_ALLOWED_SCALAR_TAGS = {
    _STR,
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:timestamp",  # kept as the original text: JSON has no dates
}
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"


@dataclass(frozen=True, slots=True)
class Mark:
    line: int  # 1-based
    col: int  # 1-based
    style: str | None = None  # scalar style: '|', '>', '"', "'" or None


@dataclass
class SourceMap:
    """Positions of values (and of the keys that name them) in one YAML file."""

    file: str
    values: dict[YamlPath, Mark] = field(default_factory=dict)
    keys: dict[YamlPath, Mark] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list, repr=False)

    def block_location(self, path: YamlPath, inner_line: int) -> Location:
        """Where line `inner_line` (1-based) of a multi-line string value sits in the file."""
        mark = self.values.get(tuple(path))
        if mark is None:
            return self.locate(path)
        line = mark.line + inner_line if mark.style in ("|", ">") else mark.line + inner_line - 1
        col = mark.col
        if mark.style in ("|", ">") and 0 < line <= len(self.lines):
            text = self.lines[line - 1]
            col = len(text) - len(text.lstrip(" ")) + 1
        return Location(self.file, line, col, format_path(path))

    def locate(self, path: YamlPath, *, key: bool = False) -> Location:
        """The nearest known position for `path` (walking up to its parents)."""
        probe = tuple(path)
        while True:
            mark = (self.keys.get(probe) if key else None) or self.values.get(probe)
            if mark is not None:
                return Location(self.file, mark.line, mark.col, format_path(path))
            if not probe:
                return Location(self.file, 1, 1, format_path(path))
            probe = probe[:-1]

    def mark(self, path: YamlPath) -> Mark | None:
        return self.values.get(tuple(path))


def format_path(path: YamlPath) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


class YamlLoadError(Exception):
    def __init__(self, issue: ConfigIssue):
        super().__init__(str(issue))
        self.issue = issue


def load_yaml_file(path: Path, display_name: str) -> tuple[Any, SourceMap]:
    """Load one YAML file into plain data and its SourceMap, or raise YamlLoadError."""

    def fail(message: str, hint: str = "", line: int = 0, col: int = 0) -> YamlLoadError:
        return YamlLoadError(ConfigIssue(Location(display_name, line, col), message, hint))

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise fail(f"cannot read file: {exc.strerror}", "check the path and its permissions") from None
    if len(raw) > MAX_FILE_BYTES:
        raise fail(
            f"file is {len(raw):,} bytes, above the {MAX_FILE_BYTES:,}-byte limit",
            "split it into a tools/, skills/ or workflows/ directory of smaller files",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise fail(
            f"file is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            "save the file as UTF-8",
            line,
            col,
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return load_yaml_text(text, display_name)


def load_yaml_text(text: str, display_name: str) -> tuple[Any, SourceMap]:
    def fail(message: str, hint: str = "", line: int = 0, col: int = 0) -> YamlLoadError:
        return YamlLoadError(ConfigIssue(Location(display_name, line, col), message, hint))

    try:
        _check_depth(text)
        node = yaml.compose(text, Loader=_Loader)
    except _TooDeep as exc:
        raise fail(
            f"nesting is deeper than {MAX_DEPTH} levels",
            "flatten the structure; deep nesting is not needed in skillyard files",
            exc.line,
            exc.col,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        raise fail(f"YAML syntax error: {exc.problem or exc.context}", "fix the YAML syntax", line, col) from None
    except yaml.YAMLError as exc:
        raise fail(f"YAML error: {exc}", "fix the YAML syntax") from None
    source = SourceMap(display_name, lines=text.splitlines())
    if node is None:
        return None, source
    return _Builder(source, fail).build(node), source


class _TooDeep(Exception):
    def __init__(self, line: int, col: int):
        self.line, self.col = line, col


def _check_depth(text: str) -> None:
    """Walk the event stream (iterative, no recursion) and refuse deep nesting early."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise _TooDeep(event.start_mark.line + 1, event.start_mark.column + 1)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


class _Builder:
    """Turns a composed node graph into plain data with an explicit stack (no recursion)."""

    def __init__(self, source: SourceMap, fail: Any):
        self.source = source
        self.fail = fail
        self.budget = MAX_NODES

    def _mark(self, node: yaml.Node) -> Mark:
        style = getattr(node, "style", None) if isinstance(node, yaml.ScalarNode) else None
        return Mark(node.start_mark.line + 1, node.start_mark.column + 1, style)

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        if node.tag not in _ALLOWED_SCALAR_TAGS:
            raise self._bad_tag(node)
        if node.tag in (_STR, "tag:yaml.org,2002:timestamp"):
            return node.value
        return _SCALAR.construct_object(node)

    def _bad_tag(self, node: yaml.Node) -> YamlLoadError:
        mark = self._mark(node)
        return self.fail(
            f"YAML tag {node.tag!r} is not allowed",
            "only plain YAML data is accepted; remove the tag",
            mark.line,
            mark.col,
        )

    def build(self, root: yaml.Node) -> Any:
        result: dict[str, Any] = {}
        # Each work item: (node, path, container, key-in-container)
        stack: list[tuple[yaml.Node, YamlPath, Any, Any]] = [(root, (), result, "root")]
        while stack:
            node, path, container, slot = stack.pop()
            self.budget -= 1
            if self.budget < 0:
                mark = self._mark(node)
                raise self.fail(
                    f"document expands to more than {MAX_NODES:,} values (alias expansion?)",
                    "remove the alias chain that multiplies the document",
                    mark.line,
                    mark.col,
                )
            self.source.values[path] = self._mark(node)
            if isinstance(node, yaml.ScalarNode):
                container[slot] = self._scalar(node)
            elif isinstance(node, yaml.SequenceNode):
                if node.tag != _SEQ:
                    raise self._bad_tag(node)
                items: list[Any] = [None] * len(node.value)
                container[slot] = items
                for index in range(len(node.value) - 1, -1, -1):
                    stack.append((node.value[index], path + (index,), items, index))
            elif isinstance(node, yaml.MappingNode):
                if node.tag != _MAP:
                    raise self._bad_tag(node)
                mapping: dict[str, Any] = {}
                container[slot] = mapping
                pending = []
                for key_node, value_node in self._pairs(node):
                    if not isinstance(key_node, yaml.ScalarNode):
                        mark = self._mark(key_node)
                        raise self.fail("mapping keys must be plain scalars", "", mark.line, mark.col)
                    key = self._scalar(key_node)
                    key = key if isinstance(key, str) else str(key).lower() if isinstance(key, bool) else str(key)
                    if key in mapping:
                        mark = self._mark(key_node)
                        first = self.source.keys[path + (key,)]
                        raise self.fail(
                            f"duplicate key {key!r} (first defined at line {first.line})",
                            "remove or rename one of them",
                            mark.line,
                            mark.col,
                        )
                    mapping[key] = None
                    self.source.keys[path + (key,)] = self._mark(key_node)
                    pending.append((value_node, path + (key,), mapping, key))
                stack.extend(reversed(pending))
            else:  # pragma: no cover - composer only yields the three node kinds
                raise self.fail(f"unsupported YAML node {type(node).__name__}")
        return result["root"]

    def _pairs(self, node: yaml.MappingNode) -> list[tuple[yaml.Node, yaml.Node]]:
        """Key/value pairs with `<<` merge keys applied (explicit keys win)."""
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        own: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, yaml.MappingNode):
                        mark = self._mark(source)
                        raise self.fail("a `<<` merge needs a mapping", "", mark.line, mark.col)
                    merged.extend(source.value)
            else:
                own.append((key_node, value_node))
        if not merged:
            return own
        own_keys = {k.value for k, _ in own if isinstance(k, yaml.ScalarNode)}
        seen: set[str] = set()
        result = []
        for key_node, value_node in merged:
            if key_node.value in own_keys or key_node.value in seen:
                continue
            seen.add(key_node.value)
            result.append((key_node, value_node))
        return result + own

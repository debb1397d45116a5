"""Safe YAML loading that remembers where every value came from.

PyYAML's parser (the C one when available) gives a stream of events with marks; we build
plain JSON-like data from that stream ourselves, in one pass and without recursion, so that:

* only the YAML core tags are accepted (no `!!python/...`, no custom tags), and nothing
  but str/int/float/bool/None is ever constructed;
* duplicate keys (and duplicate anchors) are an error, not a silent overwrite;
* an alias is counted before it is copied: a billion-laughs file stops at the alias that
  crosses the budget, in microseconds and with no memory spent on the expansion;
* nesting deeper than a limit stops at the first event past it (10,000 levels is a clean
  error, never a RecursionError; PyYAML's recursive composer is not used at all);
* every value's position is known through a `SourceMap` keyed by its YAML path.

Most files are plain maps, lists and scalars. Those are built by a lean pass that keeps no
positions (`_fast_build`); their SourceMap keeps the text and builds the positions with the
full builder the first time a problem needs one. Everything else (anchors, aliases, tags,
merges, limits, errors) goes through the full builder straight away.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from ..errors import ConfigIssue, Location, YamlLoadError

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 1_000_000
# Values that aliases may add beyond the ones written out (shared schemas need a few hundred).
MAX_ALIAS_EXPANSION = 100_000

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

YamlPath = tuple[str | int, ...]

_STR = "tag:yaml.org,2002:str"
_ALLOWED_SCALAR_TAGS = {
    _STR,
    "tag:yaml.org,2002:merge",  # only meaningful as a key: `<<`
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:timestamp",  # kept as the original text: JSON has no dates
}
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE_KEY: Any = type("_MergeKey", (), {"__repr__": lambda self: "<<"})()


class Mark(NamedTuple):
    """A value's position (a tuple: cheap to make by the hundred thousand)."""

    line: int  # 1-based
    col: int  # 1-based
    style: str | None = None  # scalar style: '|', '>', '"', "'" or None
    end_line: int = 0  # 1-based line where the value ends (0: unknown)


_Positions = tuple[dict[YamlPath, Mark], dict[YamlPath, Mark], dict[YamlPath, YamlPath]]


class SourceMap:
    """Positions of values (and of the keys that name them) in one YAML file.

    Positions are only needed to report a problem, so a file that loads cleanly keeps its
    text and the positions of its entry names (the keys one and two levels down), and the
    full map of positions is built from the text the first time anything else is asked.
    """

    __slots__ = ("file", "_lines", "_text", "_eager_keys", "_positions", "_lock")

    def __init__(
        self,
        file: str,
        lines: list[str] | None = None,
        *,
        text: str | None = None,
        eager_keys: dict[YamlPath, Mark] | None = None,
    ):
        self.file = file
        self._lines = lines
        self._text = text  # given: the positions are built from it on first use
        self._eager_keys = eager_keys or {}
        # (values, keys, aliases). `aliases`: where the content of an alias copy (or a
        # `<<`-merged key) was written, path → path.
        self._positions: _Positions | None = None if text is not None else ({}, {}, {})
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SourceMap(file={self.file!r})"

    def _built(self) -> "_Positions":
        """The positions, built from the text by the full builder the first time they are needed."""
        if self._positions is None:
            with self._lock:
                if self._positions is None:
                    full = SourceMap(self.file)
                    try:
                        _Builder(full, _raise_load_error(self.file)).build(_events(self._text or ""))
                    except (YamlLoadError, yaml.YAMLError):  # pragma: no cover - the file loaded once already
                        pass
                    self._positions = full._positions
        return self._positions  # type: ignore[return-value]

    values = property(lambda self: self._built()[0], doc="value path → Mark")
    keys = property(lambda self: self._built()[1], doc="key path → Mark (where the key naming the value is)")
    aliases = property(lambda self: self._built()[2], doc="alias copy path → anchored path")

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self._text.splitlines() if self._text is not None else []
        return self._lines

    def find(self, path: YamlPath, *, key: bool = False) -> Mark | None:
        """The position of exactly `path`, following aliases back to the anchored text."""
        path = tuple(path)
        if key and self._eager_keys:
            mark = self._eager_keys.get(path)
            if mark is not None:
                return mark
        for _ in range(MAX_DEPTH * 4):  # alias chains are finite; this only bounds the walk
            mark = (self.keys if key else self.values).get(path)
            if mark is not None or not self.aliases:
                return mark
            for cut in range(len(path), 0, -1):
                target = self.aliases.get(path[:cut])
                if target is not None:
                    path = target + path[cut:]
                    break
            else:
                return None
        return None

    def block_location(self, path: YamlPath, inner_line: int) -> Location:
        """Where line `inner_line` (1-based) of a string value sits in the file.

        Literal blocks (`|`) keep their lines; folded blocks (`>`) join lines, and quoted or
        plain scalars fold line breaks and may hold `\\n` escapes: each style is mapped back.
        """
        mark = self.find(path)
        if mark is None:
            return self.locate(path)
        if mark.style in ("|", ">"):
            found = _block_scalar_line(self.lines, mark, inner_line)
        else:
            found = _flow_scalar_line(self.lines, mark, inner_line)
        if found is None:
            return Location(self.file, mark.line, mark.col, format_path(path))
        return Location(self.file, found[0], found[1], format_path(path))

    def locate(self, path: YamlPath, *, key: bool = False) -> Location:
        """The nearest known position for `path` (walking up to its parents)."""
        probe = tuple(path)
        while True:
            mark = (self.find(probe, key=True) if key else None) or self.find(probe)
            if mark is not None:
                return Location(self.file, mark.line, mark.col, format_path(path))
            if not probe:
                return Location(self.file, 1, 1, format_path(path))
            probe = probe[:-1]

    def mark(self, path: YamlPath) -> Mark | None:
        return self.find(path)


def _block_scalar_line(lines: list[str], mark: Mark, inner_line: int) -> tuple[int, int] | None:
    """File (line, col) of the `inner_line`-th line of the `|` or `>` block starting at `mark`."""
    body: list[int] = []  # file line numbers (1-based) of the block's content
    indent: int | None = None
    for number in range(mark.line + 1, len(lines) + 1):
        text = lines[number - 1]
        stripped = text.lstrip(" ")
        if not stripped.strip():
            body.append(number)
            continue
        width = len(text) - len(stripped)
        if indent is None:
            indent = width
        if width < indent:
            break
        body.append(number)
    while body and not lines[body[-1] - 1].strip():
        body.pop()  # trailing blank lines belong to nothing a template error can point at
    if indent is None or not body:
        return None
    out = 1
    previous: str | None = None  # None: before the first text line
    blanks = 0
    for number in body:
        text = lines[number - 1]
        if not text.strip():
            blanks += 1
            continue
        content = text[indent:]
        if previous is None:
            out += blanks  # leading blank lines are kept as newlines in both styles
        elif mark.style == "|":
            out += 1 + blanks
        elif content[:1] in (" ", "\t") or previous[:1] in (" ", "\t"):
            out += 1 + blanks  # more-indented lines keep their line breaks in a folded block
        else:
            out += blanks  # a single break folds into a space; each blank line is one newline
        blanks = 0
        previous = content
        if out >= inner_line:
            return number, indent + 1
    return None


def _flow_scalar_line(lines: list[str], mark: Mark, inner_line: int) -> tuple[int, int] | None:
    """File (line, col) of the `inner_line`-th line of a plain or quoted scalar at `mark`.

    Across lines, a single line break folds into a space and each blank line is a newline;
    in a double-quoted scalar each `\\n` escape is a newline too.
    """
    if inner_line <= 1:
        return mark.line, mark.col
    out = 1
    last = min(mark.end_line or mark.line, len(lines))
    for number in range(mark.line, last + 1):
        text = lines[number - 1]
        if number > mark.line and not text.strip():
            out += 1
            continue
        if out >= inner_line:
            return number, len(text) - len(text.lstrip()) + 1
        if mark.style != '"':
            continue
        offset = mark.col if number == mark.line else 0  # skip the opening quote
        index = offset
        while index < len(text):
            if text[index] == "\\":
                if text[index + 1 : index + 2] == "n":
                    out += 1
                    if out >= inner_line:
                        return number, index + 3
                index += 2
                continue
            index += 1
    return None


def format_path(path: YamlPath) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


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
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise fail("file is UTF-16 encoded, not UTF-8", "save the file as UTF-8", 1, 1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise fail(
            f"file is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            "save the file as UTF-8 (this byte suggests Latin-1 or Windows-1252)" if raw[exc.start] >= 0x80 else "save the file as UTF-8",
            line,
            col,
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return load_yaml_text(text, display_name)


def load_yaml_text(text: str, display_name: str) -> tuple[Any, SourceMap]:
    fail = _raise_load_error(display_name)
    eager_keys: dict[YamlPath, Mark] = {}
    data = _fast_build(text, eager_keys)
    if data is not _SLOW:
        return data, SourceMap(display_name, text=text, eager_keys=eager_keys)
    # Something beyond plain maps, lists and scalars (anchors, tags, `<<`, a limit, an
    # error): the full builder decides, and reports problems with their positions.
    source = SourceMap(display_name, lines=text.splitlines())
    try:
        return _Builder(source, fail).build(_events(text)), source
    except yaml.MarkedYAMLError as exc:
        message, hint, line, col = _describe_yaml_error(exc, text)
        raise fail(message, hint, line, col) from None
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        character = exc.character if isinstance(exc.character, str) else chr(exc.character)
        raise fail(
            f"character {ord(character):#06x} is not allowed in YAML ({exc.reason})",
            "remove the control character",
            line,
            col,
        ) from None
    except yaml.YAMLError as exc:
        raise fail(f"YAML error: {str(exc).splitlines()[0]}", "fix the YAML syntax") from None


def _raise_load_error(display_name: str) -> Any:
    def fail(message: str, hint: str = "", line: int = 0, col: int = 0) -> YamlLoadError:
        return YamlLoadError(ConfigIssue(Location(display_name, line, col), message, hint))

    return fail


_SLOW: Any = object()  # _fast_build's answer when the full builder must decide
_PLAIN: dict[str, tuple[str, Any]] = {}  # plain scalar text → (tag, value); values are immutable


def _plain(text: str) -> tuple[str, Any]:
    tag = _resolve_scalar(text, (True, False))
    if tag == _STR or tag == _TIMESTAMP:
        found: tuple[str, Any] = (tag, text)
    elif tag in _ALLOWED_SCALAR_TAGS and tag != _MERGE:
        found = (tag, _CONSTRUCT[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, text)))
    else:
        found = (tag, _SLOW)
    if len(_PLAIN) < 100_000 and len(text) < 64:
        _PLAIN[text] = found
    return found


def _fast_build(text: str, eager_keys: dict[YamlPath, Mark]) -> Any:
    """Plain data from a document of plain maps, lists and scalars, without positions.

    The common case, three to four times cheaper than the full builder. Anything else (an
    anchor, an alias, a tag, a `<<` merge, a duplicate key, a collection as a key, a second
    document, a limit reached, a syntax error) returns _SLOW at once, before any work it
    could multiply, and the full builder then decides and reports, with positions. The
    values built are the same as the full builder's. Positions of the keys one and two
    levels down (the entry names) are kept in `eager_keys`: linking asks for them.
    """
    loader = _Loader(text)
    get_event = loader.get_event
    scalar_event, mapping_start, sequence_start = yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent
    mapping_end, sequence_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
    plain_cache = _PLAIN
    missing = _MISSING
    stack: list[tuple[Any, bool]] = []
    push, pop = stack.append, stack.pop
    current: Any = None  # the open dict or list (None: nothing open yet)
    is_map = False
    depth = 0  # open collections
    key: Any = missing  # in a mapping: the key waiting for its value
    top_key: Any = missing  # the last key of the root mapping
    root: Any = missing
    count = 0
    documents = 0
    try:
        while True:
            event = get_event()
            kind = type(event)
            if kind is scalar_event:
                if event.anchor is not None or event.tag is not None:
                    return _SLOW
                text_value = event.value
                style = event.style
                if not style:  # plain (untagged): resolved like PyYAML (int, bool, null…)
                    value = (plain_cache.get(text_value) or _plain(text_value))[1]
                    if value is _SLOW:  # `<<` and other scalars only the full builder handles
                        return _SLOW
                else:  # quoted or a block: a string
                    value = text_value
                if is_map and key is missing:  # a key: its text, as written (`off:` stays "off")
                    count += 1
                    if text_value in current:
                        return _SLOW
                    key = text_value
                    if depth <= 2:
                        if depth == 1:
                            top_key = key
                            path: YamlPath = (key,)
                        else:
                            path = (top_key, key)
                        start = event.start_mark
                        eager_keys[path] = Mark(start.line + 1, start.column + 1, style or None, event.end_mark.line + 1)
                    continue
                opens = None
            elif kind is mapping_end or kind is sequence_end:
                current, is_map = pop()
                depth -= 1
                continue
            elif kind is mapping_start or kind is sequence_start:
                if event.anchor is not None or event.tag is not None or depth >= MAX_DEPTH:
                    return _SLOW
                if is_map and key is missing:  # a collection as a key
                    return _SLOW
                opens = kind is mapping_start
                value = {} if opens else []
            elif kind is yaml.AliasEvent:
                return _SLOW
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    return _SLOW
                continue
            elif event is None or kind is yaml.StreamEndEvent:
                break
            else:  # stream start, document end: nothing to build
                continue
            # A value (a scalar, or a collection that opens): put it where it belongs.
            count += 1
            if count > MAX_NODES:
                return _SLOW
            if is_map:
                current[key] = value
                key = missing
            elif current is not None:
                current.append(value)
            else:
                root = value
            if opens is not None:
                push((current, is_map))
                depth += 1
                current, is_map = value, opens
    except yaml.YAMLError:
        return _SLOW
    finally:
        loader.dispose()
    if count > MAX_NODES:
        return _SLOW
    return None if root is missing else root


def _events(text: str) -> Any:
    """The parser's events, pulled straight from the (C) loader."""
    loader = _Loader(text)
    try:
        while True:
            event = loader.get_event()
            if event is None or type(event) is yaml.StreamEndEvent:
                return
            yield event
    finally:
        loader.dispose()


def _line_col(text: str, position: int) -> tuple[int, int]:
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _describe_yaml_error(exc: yaml.MarkedYAMLError, text: str) -> tuple[str, str, int, int]:
    """One readable message from PyYAML's (context, problem) pair, at the problem's mark."""
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
    problem = (exc.problem or "").strip()
    context = (exc.context or "").strip()
    if "maximum nesting depth" in problem:  # libyaml ≥ 0.2.5 stops deep flow nesting while scanning ahead
        return (
            f"nesting is deeper than {MAX_DEPTH} levels",
            "flatten the structure; deep nesting is not needed in skillyard files",
            line,
            col,
        )
    if context and exc.context_mark is not None and exc.problem_mark is not None:
        where = f"line {exc.context_mark.line + 1}:{exc.context_mark.column + 1}"
        if context.endswith("first occurrence"):
            message = f"{context.removesuffix('; first occurrence')} (first at {where}, again here)"
        else:
            message = f"{problem} ({context} at {where})"
    else:
        message = problem or context or "invalid YAML"
    hint = "fix the YAML syntax"
    lines = text.splitlines()
    offending = lines[line - 1][col - 1 : col] if 0 < line <= len(lines) else ""
    if offending == "\t" or "cannot start any token" in problem and "\t" in (lines[line - 1] if 0 < line <= len(lines) else ""):
        hint = "YAML does not allow tabs for indentation; use spaces"
    elif "another document" in problem:
        hint = "a skillyard file holds one YAML document; remove the `---` separator"
    elif "undefined alias" in problem:
        hint = "define the anchor (&name) before using the alias (*name)"
    elif "duplicate anchor" in context:
        hint = "give each anchor its own name"
    elif "mapping values are not allowed" in problem:
        hint = _quote_hint(lines[line - 1] if 0 < line <= len(lines) else "") or hint
    elif "expected ',' or '}'" in problem:
        hint = _flow_quote_hint(lines[line - 1] if 0 < line <= len(lines) else "") or hint
    return f"YAML syntax error: {message}", hint, line, col


_KEY_AND_VALUE = re.compile(r"^(\s*(?:-\s+)?)([^\s:#'\"{\[][^:#]*?):[ \t]+(.*?)(?:\s+#.*)?$")
_FLOW_ENTRY_WITH_TWO_COLONS = re.compile(r"[{,]\s*([^\s,{}\[\]'\"][^,{}:]*):\s+([^,{}\[\]'\"]*?:\s[^,{}\[\]]*?)\s*[,}]")


def _flow_quote_hint(text: str) -> str:
    """`{description: a: b}` → quote the value inside the braces."""
    match = _FLOW_ENTRY_WITH_TWO_COLONS.search(text)
    if match is None:
        return ""
    value = match.group(2).replace("\\", "\\\\").replace('"', '\\"')
    return f"quote the value: write {match.group(1)}: \"{value}\" (an unquoted ': ' starts a new key)"


def _quote_hint(text: str) -> str:
    """For a plain value that holds `: ` (`description: Fetch a page: returns text`): quote it."""
    match = _KEY_AND_VALUE.match(text)
    if match is None or match.group(3).startswith(("{", "[", "'", '"', "|", ">")) or ": " not in match.group(3):
        return ""
    value = match.group(3).replace("\\", "\\\\").replace('"', '\\"')
    return f"quote the value: write {match.group(2)}: \"{value}\" (an unquoted ': ' starts a new key)"


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
_MISSING: Any = object()


def _resolve_scalar(value: str, implicit: tuple[bool, bool]) -> str:
    """The tag of an untagged scalar, as PyYAML's resolver decides it (plain → int, bool…)."""
    if not implicit[0]:
        return _STR
    tag = _RESOLVED.get(value)
    if tag is None:
        tag = _STR
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
    key: Any = _MISSING  # mapping: the key waiting for its value
    merges: list[tuple[Any, YamlPath]] = field(default_factory=list)  # `<<` sources and their paths


class _Builder:
    """Builds plain data straight from the parser's events, in one pass, with no recursion.

    Depth, value count and alias expansion are checked as the events arrive, so a deep or
    exploding document stops at the first event past a limit. An alias is counted before
    it is copied, and its positions are not copied at all: the SourceMap redirects paths
    inside the copy to the anchored text.
    """

    def __init__(self, source: SourceMap, fail: Any):
        self.source = source
        self.fail = fail
        self.stack: list[_Frame] = []
        self.anchors: dict[str, _Anchor] = {}
        self.open_anchors: set[str] = set()
        self.count = 0  # values built so far, alias copies included
        self.alias_added = 0
        self.root: Any = _MISSING
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
                    mark = _mark(event)
                    raise self.fail(
                        "YAML syntax error: found a second document (a skillyard file holds one)",
                        "remove the `---` separator and everything after it, or move it to its own file",
                        mark.line,
                        mark.col,
                    )
        return None if self.root is _MISSING else self.root

    def _scalar(self, event: yaml.ScalarEvent) -> None:
        tag = event.tag
        if tag is None or tag == "!":
            tag = _resolve_scalar(event.value, event.implicit)
        mark = _mark(event, event.style or None)
        if tag not in _ALLOWED_SCALAR_TAGS:
            raise self._bad_tag(tag, mark)
        if tag == _STR or tag == _TIMESTAMP:
            value: Any = event.value
        elif tag == _MERGE:
            value = _MERGE_KEY
        elif self._expects_key():
            value = event.value  # a key is a name: `off:` stays "off", not YAML 1.1's false
        else:
            value = _CONSTRUCT[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, event.value))
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
        return type(frame.value) is not list and frame.key is _MISSING

    def _start(self, event: Any, is_map: bool) -> None:
        mark = _mark(event)
        tag = event.tag
        if tag not in (None, "!", _MAP if is_map else _SEQ):
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
        mark = _mark(event)
        name = event.anchor
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
        if frame.key is _MISSING:
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
        if frame.key is _MISSING:  # this scalar is a key
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
        frame.key = _MISSING
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


def _mark(event: Any, style: str | None = None) -> Mark:
    start, end = event.start_mark, event.end_mark
    return Mark(start.line + 1, start.column + 1, style, end.line + 1)

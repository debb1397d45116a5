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
full builder (yaml_builder.py) the first time a problem needs one. Everything else (anchors,
aliases, tags, merges, limits, errors) goes through the full builder straight away.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigIssue, Location, YamlLoadError
from .yaml_builder import (
    LOADER,
    MAX_DEPTH,
    MAX_NODES,
    MERGE_TAG,
    MISSING,
    SCALAR_TAGS,
    STR_TAG,
    TIMESTAMP_TAG,
    Builder,
    Mark,
    YamlPath,
    construct_scalar,
    events,
    resolve_scalar,
)

MAX_FILE_BYTES = 4 * 1024 * 1024
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
        positions = self._positions
        if positions is None:
            with self._lock:
                positions = self._positions
                if positions is None:
                    full = SourceMap(self.file)
                    try:
                        Builder(full, _raise_load_error(self.file)).build(events(self._text or ""))
                    except (YamlLoadError, yaml.YAMLError):  # pragma: no cover - the file loaded once already
                        pass
                    positions = full._positions
                    assert positions is not None  # a map made without text starts with its (empty) positions
                    self._positions = positions
        return positions

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
        return Builder(source, fail).build(events(text)), source
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
    tag = resolve_scalar(text, (True, False))
    if tag == STR_TAG or tag == TIMESTAMP_TAG:
        found: tuple[str, Any] = (tag, text)
    elif tag in SCALAR_TAGS and tag != MERGE_TAG:
        found = (tag, construct_scalar(tag, text))
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
    loader = LOADER(text)
    get_event = loader.get_event
    scalar_event, mapping_start, sequence_start = yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent
    mapping_end, sequence_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
    plain_cache = _PLAIN
    missing = MISSING
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
    lines = text.splitlines()
    hint = _syntax_hint(problem, context, exc.context_mark, lines[line - 1] if 0 < line <= len(lines) else "", line, col)
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


def _syntax_hint(problem: str, context: str, opened_at: Any, found: str, line: int, col: int) -> str:
    """What to change, from what the parser found (its `problem`) and what it was reading (its
    `context`, opened at `opened_at`). The line is named by its key only: a value may be a secret."""
    opened = f"line {opened_at.line + 1}:{opened_at.column + 1}" if opened_at is not None else "above"
    key = found.strip().lstrip("- ").split(":", 1)[0].strip()
    named = f" (`{key}:`)" if key and ":" in found and len(key) <= 60 else ""
    if "expected ',' or ']'" in problem:
        return f"the list opened with `[` at {opened} is not closed: add the missing `]` before line {line}, column {col} (or a `,` between items)"
    if "expected ',' or '}'" in problem:
        return (f"the mapping opened with `{{` at {opened} is not closed: add the missing `}}` before line {line}, column {col} "
                "(or a `,` between entries)")
    if "end of stream" in problem and "quoted scalar" in context:
        return f"the quoted string opened at {opened} never ends: close it with the same quote"
    if any(words in problem for words in ("expected key", "expected <document start>", "expected '-' indicator",
                                          "expected <block end>")):
        return (f"line {line}{named} is indented differently from the block it belongs to (from {opened}): the keys of "
                "one mapping, and the items of one list, start in the same column (spaces, no tabs)")
    if "cannot start any token" in problem:
        char = found[col - 1 : col]
        shown = f"`{char}` " if char.isprintable() and not char.isspace() else ""
        return f"the character {shown}at line {line}, column {col} cannot start a plain value: put the value in quotes"
    return f"look at line {line}, column {col}{named}: {problem or context or 'the YAML does not parse there'}"


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



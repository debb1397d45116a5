"""Read a batch's cases from JSON lines, CSV or YAML, each error naming its file and line."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from ..errors import UsageError
from ..safety.untrusted import MAX_DEPTH

MAX_DATA_BYTES = 256 << 20  # a dataset larger than this is a mistake, not a batch
# Deep enough for a case that checks the router refuses arguments nested past MAX_DEPTH (64),
# far below the depth where reading (or later writing) a case would overflow Python's stack.
MAX_CASE_DEPTH = 4 * MAX_DEPTH
_LONG_NUMBER = "a number has more digits than Python reads (4,300); write it as a string"
_TOO_DEEP = f"nested more than {MAX_CASE_DEPTH} levels deep; a case (its arguments and expect) may nest at most {MAX_CASE_DEPTH}"
_CASE_KEYS = frozenset({"id", "arguments", "expect"})


@dataclass(frozen=True, slots=True)
class Case:
    """One input of the batch: its id, the tool's arguments, and what its result must satisfy."""

    id: str
    arguments: dict[str, Any]
    expect: Any  # as written (a mapping or a list of mappings); compiled by engine/link/expect.py
    where: str  # file:line, for error messages


def load_cases(path: str | Path, string_fields: frozenset[str] = frozenset()) -> list[Case]:
    """The cases in `path` (.jsonl/.ndjson, .json, .csv, .yaml/.yml), in file order.

    `string_fields`: the tool's parameters declared as strings; a CSV cell for one of them is
    kept as text even when it looks like JSON (a zip code `01234`, a version `1.10`).
    """
    file = Path(path)
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise UsageError(f"--data {path}: cannot read it ({exc.strerror or exc})") from None
    if size > MAX_DATA_BYTES:
        raise UsageError(f"--data {path}: {size} bytes is more than {MAX_DATA_BYTES >> 20} MiB; split the dataset")
    text = _read_text(file)
    suffix = file.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        cases = list(_json_lines(file, text))
    elif suffix == ".csv":
        cases = list(_csv_rows(file, text, string_fields))
    elif suffix in (".yaml", ".yml", ".json"):
        cases = list(_document(file, text))
    else:
        raise UsageError(f"--data {path}: unknown format {suffix or '(no suffix)'!r}; use .jsonl, .csv, .yaml or .json")
    _check_unique(cases)
    return cases


def _read_text(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--data {file}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise UsageError(f"--data {file}: cannot read it ({exc.strerror or exc})") from None


def _json_lines(file: Path, text: str) -> Iterator[Case]:
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = _json(line)
        except _Unreadable as exc:
            raise UsageError(f"{file}:{number}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise UsageError(f"{file}:{number}: not JSON ({exc.msg} at column {exc.colno}); "
                             "each line must be one JSON object") from None
        yield _case(value, f"{file}:{number}", str(number))


class _Unreadable(ValueError):
    """JSON text that parses but cannot be a case: nested past MAX_CASE_DEPTH, a huge number."""


class _TooDeep(_Unreadable):
    """Nested past MAX_CASE_DEPTH."""


def _json(text: str) -> Any:
    """`json.loads`, refusing nesting past MAX_CASE_DEPTH (_Unreadable) rather than overflowing the
    stack, here or wherever the case is read later. The walk runs only when the text holds more
    brackets than the limit (counted at C speed). json.JSONDecodeError for text that is not JSON."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise _TooDeep(_TOO_DEEP) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # int() refuses more than 4,300 digits
        raise _Unreadable(_LONG_NUMBER) from None
    if len(text) > MAX_CASE_DEPTH and text.count("[") + text.count("{") > MAX_CASE_DEPTH and _too_deep(value):
        raise _TooDeep(_TOO_DEEP)
    return value


def _too_deep(value: Any) -> bool:
    """Whether `value` nests lists and objects more than MAX_CASE_DEPTH levels (iteratively)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= MAX_CASE_DEPTH:
                return True
            stack.extend((sub, depth + 1) for sub in (item.values() if isinstance(item, dict) else item))
    return False


def _document(file: Path, text: str) -> Iterator[Case]:
    """A YAML (or JSON) list of cases; each case's line comes from the YAML node."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except RecursionError:  # PyYAML's composer recurses: a few hundred levels overflow it
        raise UsageError(f"{file}:{_deep_yaml_line(text)}: {_TOO_DEEP}") from None
    except ValueError as exc:  # int() of more than 4,300 digits, a date that does not exist
        line = _long_number_line(text)
        raise UsageError(f"{file}:{line}: {_LONG_NUMBER}" if line else
                         f"{file}: a value cannot be read ({exc}); quote it to keep it as text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}" if mark is not None else str(file)
        raise UsageError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc}); check the indentation") from None
    if isinstance(data, dict) and isinstance(data.get("cases"), list) and node is not None:
        node = next(v for k, v in node.value if k.value == "cases")
        data = data["cases"]
    if not isinstance(data, list) or node is None:  # no node: an empty document (data None)
        raise UsageError(f"{file}: expected a list of cases (or `cases:` holding one), found {type(data).__name__}")
    for position, (item, item_node) in enumerate(zip(data, node.value, strict=True), 1):
        line = item_node.start_mark.line + 1
        if _too_deep(item):
            raise UsageError(f"{file}:{line}: {_TOO_DEEP}")
        yield _case(item, f"{file}:{line}", str(position))


def _deep_yaml_line(text: str) -> int:
    """The line where the YAML text first nests past MAX_CASE_DEPTH (its parser is iterative)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_CASE_DEPTH:
                return _line(event)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
    return 1  # pragma: no cover - only called when the composer overflowed


def _long_number_line(text: str) -> int | None:
    """The line of the first plain scalar too long for int() (the constructor does not say)."""
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.ScalarEvent) and event.style is None and len(event.value) > 4300:
            return _line(event)
    return None


def _line(event: yaml.Event) -> int:
    """The line an event of the parser starts on, counted from 1 (the parser marks every event)."""
    return event.start_mark.line + 1 if event.start_mark is not None else 1


def _csv_rows(file: Path, text: str, string_fields: frozenset[str]) -> Iterator[Case]:
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames:
        raise UsageError(f"{file}:1: the first row must name the columns (the tool's arguments)")
    for row in reader:
        number = reader.line_num
        where = f"{file}:{number}"
        if None in row:
            raise UsageError(f"{where}: more cells than columns; quote cells that contain commas")
        case_id = row.pop("id", None) if "id" not in string_fields else None
        expect_text = row.pop("expect", None) if "expect" not in string_fields else None
        arguments = {key: _cell(value, key in string_fields, where) for key, value in row.items() if value != ""}
        expect = _parse_expect_cell(expect_text, where) if expect_text else None
        yield Case(str(case_id or number - 1), arguments, expect, where)


def _cell(text: str, keep_text: bool, where: str) -> Any:
    """A CSV cell: JSON when it looks like JSON (objects, arrays, numbers, true/false/null)."""
    if keep_text:
        return text
    try:
        return _json(text)
    except _TooDeep as exc:
        raise UsageError(f"{where}: {exc}") from None
    except ValueError:  # not JSON, or a number too long to read: text
        return text


def _parse_expect_cell(text: str, where: str) -> Any:
    try:
        return _json(text)
    except _Unreadable as exc:
        raise UsageError(f"{where}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: the expect cell is not JSON ({exc.msg}); write e.g. "
                         '{"path": "/stats/words", "equals": 15}') from None


def _case(value: Any, where: str, default_id: str) -> Case:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: a case must be a JSON object (the arguments, or {{id, arguments, expect}}), "
                         f"found {type(value).__name__}")
    if "arguments" not in value:  # the case is the arguments themselves
        return Case(default_id, value, None, where)
    unknown = sorted(set(value) - _CASE_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown case key(s) {', '.join(unknown)}; a case has id, arguments and expect "
                         "(put tool arguments under `arguments`)")
    arguments = value["arguments"]
    if not isinstance(arguments, dict):
        raise UsageError(f"{where}: `arguments` must be an object of the tool's arguments")
    case_id = value.get("id", default_id)
    if not isinstance(case_id, (str, int)) or isinstance(case_id, bool) or str(case_id) == "":
        raise UsageError(f"{where}: `id` must be a non-empty string or a number")
    return Case(str(case_id), arguments, value.get("expect"), where)


def _check_unique(cases: list[Case]) -> None:
    seen: dict[str, str] = {}
    for case in cases:
        if case.id in seen:
            raise UsageError(f"{case.where}: case id {case.id!r} was already used at {seen[case.id]}; ids must be unique")
        seen[case.id] = case.where

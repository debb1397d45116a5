"""Read a batch's cases from JSON lines, CSV or YAML, each error naming its file and line."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from ..errors import UsageError

MAX_DATA_BYTES = 256 << 20  # a dataset larger than this is a mistake, not a batch
_CASE_KEYS = frozenset({"id", "arguments", "expect"})


@dataclass(frozen=True, slots=True)
class Case:
    """One input of the batch: its id, the tool's arguments, and what its result must satisfy."""

    id: str
    arguments: dict[str, Any]
    expect: Any  # as written (a mapping or a list of mappings); compiled by expect.py
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
            value = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{file}:{number}: not JSON ({exc.msg} at column {exc.colno}); "
                             "each line must be one JSON object") from None
        yield _case(value, f"{file}:{number}", str(number))


def _document(file: Path, text: str) -> Iterator[Case]:
    """A YAML (or JSON) list of cases; each case's line comes from the YAML node."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}" if mark is not None else str(file)
        raise UsageError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc}); check the indentation") from None
    if isinstance(data, dict) and isinstance(data.get("cases"), list):
        node = next(v for k, v in node.value if k.value == "cases")
        data = data["cases"]
    if not isinstance(data, list):
        raise UsageError(f"{file}: expected a list of cases (or `cases:` holding one), found {type(data).__name__}")
    for position, (item, item_node) in enumerate(zip(data, node.value), 1):
        line = item_node.start_mark.line + 1
        yield _case(item, f"{file}:{line}", str(position))


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
        arguments = {key: _cell(value, key in string_fields) for key, value in row.items() if value != ""}
        expect = _parse_expect_cell(expect_text, where) if expect_text else None
        yield Case(str(case_id or number - 1), arguments, expect, where)


def _cell(text: str, keep_text: bool) -> Any:
    """A CSV cell: JSON when it looks like JSON (objects, arrays, numbers, true/false/null)."""
    if keep_text:
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _parse_expect_cell(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
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

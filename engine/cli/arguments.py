"""Turning `--arg k=v`, `--arg k=@file` and `--args-json` into one arguments object."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError


def _read_source(value: str, flag: str) -> str:
    """`@path` reads a file, `-` reads stdin, anything else is the text itself."""
    if value == "-":
        return sys.stdin.read()
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"{flag}: file not found: {path}") from None
        except UnicodeDecodeError:
            raise UsageError(f"{flag}: {path} is not UTF-8 text") from None
        except OSError as exc:
            raise UsageError(f"{flag}: cannot read {path}: {exc.strerror}") from None
    return value


def _strict_json(text: str) -> Any:
    """`json.loads` without NaN/Infinity (not JSON) and without numbers too large for a float."""

    def refuse(name: str) -> Any:
        raise json.JSONDecodeError(f"{name} is not a JSON value", text, max(text.find(name), 0))

    def finite(number: str) -> float:
        value = float(number)
        if math.isinf(value):
            raise json.JSONDecodeError(f"{number} is too large", text, max(text.find(number), 0))
        return value

    return json.loads(text, parse_constant=refuse, parse_float=finite)


def build_arguments(args_json: str | None, pairs: list[str]) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    if args_json is not None:
        text = _read_source(args_json, "--args-json")
        try:
            loaded = _strict_json(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--args-json: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        if not isinstance(loaded, dict):
            raise UsageError("--args-json: expected a JSON object such as {\"jdText\": \"...\"}")
        arguments.update(loaded)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--arg {pair!r}: write it as key=value, key=@file or key=- (stdin)")
        if raw.startswith("@") or raw == "-":
            arguments[key] = _read_source(raw, f"--arg {key}")
            continue
        try:
            arguments[key] = _strict_json(raw)
        except json.JSONDecodeError:
            arguments[key] = raw  # not JSON: the text itself
    return arguments

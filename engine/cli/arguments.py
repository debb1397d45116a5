"""Turning `--arg k=v`, `--arg k=@file` and `--args-json` into one arguments object; numeric flags."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from ..errors import UsageError
from ..safety.untrusted import loads

MAX_SOURCE_BYTES = 16 * 1024 * 1024  # an argument file or stdin: /dev/zero must not fill the memory


def positive_int(text: str) -> int:
    """A flag's whole number of at least 1 (argparse turns the error into exit 2 with the flag's name)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _read_source(value: str, flag: str) -> str:
    """`@path` reads a file, `-` reads stdin, anything else is the text itself."""
    if value == "-":
        return read_stdin(flag)
    if value.startswith("@"):
        path = Path(value[1:])
        try:
            with path.open("rb") as stream:
                return _read_capped(stream, str(path), flag)
        except FileNotFoundError:
            raise UsageError(f"{flag}: file not found: {path}") from None
        except OSError as exc:
            raise UsageError(f"{flag}: cannot read {path}: {exc.strerror}") from None
    return value


def read_stdin(flag: str) -> str:
    """Standard input as text, at most MAX_SOURCE_BYTES (a UsageError beyond)."""
    binary = getattr(sys.stdin, "buffer", None)  # None: a text stream put in its place (tests, embedding)
    return _read_capped(binary if binary is not None else sys.stdin, "stdin", flag)


def _read_capped(stream: BinaryIO | TextIO, name: str, flag: str) -> str:
    """At most MAX_SOURCE_BYTES of UTF-8 text; a clear UsageError beyond that."""
    data = stream.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise UsageError(
            f"{flag}: {name} holds more than {MAX_SOURCE_BYTES // (1024 * 1024)} MiB; "
            "pass a smaller file (tool arguments are not meant for bulk data)"
        )
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{flag}: {name} is not UTF-8 text") from None


def _strict_json(text: str) -> Any:
    """JSON as the router reads it: no NaN/Infinity, no number beyond 100 digits or a float's
    range, no nesting so deep that the decoder gives up (ValueError says which)."""
    return loads(text)


def build_arguments(args_json: str | None, pairs: list[str]) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    if args_json is not None:
        text = _read_source(args_json, "--args-json")
        try:
            loaded = _strict_json(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--args-json: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        except ValueError as exc:
            raise UsageError(f"--args-json: not usable JSON: {exc}") from None
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
        except ValueError:  # json.JSONDecodeError too
            arguments[key] = raw  # not (usable) JSON: the text itself
    return arguments

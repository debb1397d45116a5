"""One rule for data from outside: tool arguments, fetched pages, model output.

Such data may be nested without end, hold numbers no JSON reader agrees on, or hold lone
UTF-16 surrogates (`"\\ud800"` is valid JSON text but no valid Unicode, so no UTF-8 encoder,
SQLite text or SSE frame can carry it). The rule:

- arguments of a tool call (the caller's data) that break it are refused (`invalid_arguments`,
  naming the JSON Pointer): nested more than MAX_DEPTH levels, a number of more than
  MAX_NUMBER_DIGITS digits, a non-finite number, a lone surrogate;
- data the engine receives from elsewhere (fetched pages, models) has its lone surrogates
  replaced with U+FFFD, and the replacement is counted so that it can be noted.

The checks are cheap where data is ordinary: `arguments_problem` lets orjson (C) look at a dict
first and walks it in Python only when orjson finds something odd; `text_may_hide_problem` is a
few substring counts over JSON text. Every walk is iterative: 100,000 levels are reported, not
a RecursionError.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import orjson

MAX_DEPTH = 64  # nesting of objects and arrays, as YAML loading allows
MAX_NUMBER_DIGITS = 100  # a number literal (or int) longer than this is refused: no JSON reader agrees on it
REPLACEMENT = "\ufffd"
# A Python str holds code points: a surrogate in one is always lone (json.loads joins valid pairs).
_SURROGATE = re.compile("[\ud800-\udfff]")
_INT_LIMIT = 10**MAX_NUMBER_DIGITS
_POINTER_PARTS = 8  # a pointer to a deep place shows its first and last few keys, not all 64
_POINTER_KEY_CHARS = 40


def has_lone_surrogate(text: str) -> bool:
    """True when `text` cannot be encoded as UTF-8 (it holds a lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def replace_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (itself when there is none)."""
    if not has_lone_surrogate(text):
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def scrub_surrogates(value: Any) -> tuple[Any, int]:
    """(a copy of `value` with lone surrogates replaced, how many strings changed).

    Returns `value` itself when nothing changed (the common case). Keys are scrubbed too.
    Iterative, so hostile nesting cannot overflow the stack.
    """
    if isinstance(value, str):
        fixed = replace_lone_surrogates(value)
        return fixed, int(fixed is not value)
    if not isinstance(value, (dict, list, tuple)):
        return value, 0
    changed = _count_bad_strings(value)
    if not changed:
        return value, 0
    return _rebuild(value), changed


def _count_bad_strings(value: Any) -> int:
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            count += has_lone_surrogate(item)
        elif isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str) and has_lone_surrogate(key):
                    count += 1
                stack.append(sub)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return count


def _rebuild(value: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH * 4:  # data this deep is refused elsewhere; do not recurse without end
        return None
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, dict):
        return {
            (replace_lone_surrogates(k) if isinstance(k, str) else k): _rebuild(v, depth + 1) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_rebuild(v, depth + 1) for v in value]
    return value


# ─── what is wrong, and where ────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a value is unfit as JSON data, and where (a JSON Pointer, shortened when deep)."""

    pointer: str
    message: str

    def __str__(self) -> str:
        return f"{self.pointer}: {self.message}"

    def as_dict(self) -> dict[str, str]:
        """The shape of a schema violation (`engine.lang.schema.Violation.as_dict`)."""
        return {"pointer": self.pointer, "message": self.message, "keyword": "untrusted"}


def _pointer(place: Any) -> str:
    """A place of the walk, (parent place, key or index) or None for the root, as a JSON Pointer.

    Places are one tuple per container item; the text is made only for the place reported.
    """
    keys: list[str] = []
    while place is not None:
        place, key = place
        text = replace_lone_surrogates(str(key)).replace("~", "~0").replace("/", "~1")
        keys.append(text if len(text) <= _POINTER_KEY_CHARS else text[: _POINTER_KEY_CHARS - 1] + "…")
    keys.reverse()
    if len(keys) > _POINTER_PARTS:  # a 64-level path is no help to read: its ends are
        half = _POINTER_PARTS // 2
        keys = [*keys[:half], f"…({len(keys) - 2 * half} more)…", *keys[-half:]]
    return "".join("/" + key for key in keys) or "/"


def find_problem(value: Any, limit: int = MAX_DEPTH, *, numbers: bool = True) -> Problem | None:
    """The first thing that makes `value` unfit as JSON data, or None.

    Nested more than `limit` levels, a lone surrogate (in a string or a key), and with
    `numbers`: an integer of more than MAX_NUMBER_DIGITS digits, a NaN or infinite float.
    """
    stack: list[tuple[Any, int, Any]] = [(value, 0, None)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth, place = pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return Problem(_pointer(place), "the text holds a lone UTF-16 surrogate, which is not valid Unicode")
        elif isinstance(item, (dict, list, tuple)):
            if depth >= limit:
                return Problem(_pointer(place), f"nested more than {limit} levels deep")
            if isinstance(item, dict):
                for key, sub in item.items():
                    if isinstance(key, str) and has_lone_surrogate(key):
                        return Problem(_pointer((place, key)), "the key holds a lone UTF-16 surrogate, which is not valid Unicode")
                    push((sub, depth + 1, (place, key)))
            else:
                for index, sub in enumerate(item):
                    push((sub, depth + 1, (place, index)))
        elif not numbers:
            continue
        elif isinstance(item, int):
            if not -_INT_LIMIT < item < _INT_LIMIT:
                return Problem(_pointer(place), f"the number has more than {MAX_NUMBER_DIGITS} digits")
        elif isinstance(item, float) and not math.isfinite(item):
            return Problem(_pointer(place), f"{item} is not a JSON number")
    return None


def nesting_problem(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """`find_problem` as one line of text (`/a/b: nested more than 64 levels deep`), or None."""
    problem = find_problem(value, limit)
    return None if problem is None else str(problem)


def arguments_problem(value: Any) -> Problem | None:
    """`find_problem` for a value that is almost always fine, at C speed when it is.

    orjson refuses lone surrogates, integers beyond 64 bits and nesting beyond 255 levels;
    NaN and infinity become `null`. So: a value orjson writes, with fewer than MAX_DEPTH
    brackets and no `null`, is fine without a walk in Python.
    """
    try:
        text = orjson.dumps(value)
    except Exception:  # noqa: BLE001 - anything orjson refuses is looked at closely
        return find_problem(value)
    # bytes.find, not `in`: `in` first tries the operand as an int and pays for a TypeError
    if len(text) > 2 * MAX_DEPTH and text.count(b"[") + text.count(b"{") > MAX_DEPTH or text.find(b"null") >= 0:
        return find_problem(value)
    return None


# ─── JSON text ───────────────────────────────────────────────────────────────────────────


def _parse_int(text: str) -> int:
    if len(text) - text.startswith("-") > MAX_NUMBER_DIGITS:
        raise ValueError(f"a number of {len(text):,} digits (at most {MAX_NUMBER_DIGITS} are accepted)")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if len(text) > MAX_NUMBER_DIGITS + 8 or not math.isfinite(value):
        shown = text if len(text) <= 24 else text[:20] + "…"
        raise ValueError(f"the number {shown} is too large or too long (at most {MAX_NUMBER_DIGITS} digits, finite)")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_reject_constant)


def loads(text: str) -> Any:
    """`json.loads` for outside text (one decoder, built once).

    json.JSONDecodeError for text that is not JSON; ValueError for NaN/Infinity, numbers of
    more than MAX_NUMBER_DIGITS digits or beyond a float's range, and nesting so deep that the
    decoder itself gives up. What it returns may still be too deep or hold a lone surrogate:
    check with `find_problem` when `text_may_hide_problem(text)`.
    """
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep") from None


def text_may_hide_problem(text: str) -> bool:
    """False when the value decoded from this JSON text can be neither too deep nor hold a
    lone surrogate (a few C-speed scans; a surrogate pair escaped as `\\ud83d\\ude00` says True)."""
    if len(text) > 2 * MAX_DEPTH and text.count("[") + text.count("{") > MAX_DEPTH:
        return True
    if "\\u" in text and ("\\ud" in text or "\\uD" in text):
        return True
    return not text.isascii() and has_lone_surrogate(text)

"""One rule for data from outside: tool arguments, fetched pages, model output.

Such data may be nested without end, hold numbers no JSON reader agrees on, or hold lone
UTF-16 surrogates (`"\\ud800"` is valid JSON text but no valid Unicode, so no UTF-8 encoder,
SQLite text or SSE frame can carry it). The rule:

- arguments of a tool call (the caller's data) that break it are refused (`invalid_arguments`);
- data the engine receives from elsewhere (fetched pages, models) has its lone surrogates
  replaced with U+FFFD, and the replacement is counted so that it can be noted.
"""

from __future__ import annotations

import re
from typing import Any

MAX_DEPTH = 64  # nesting of objects and arrays, as YAML loading allows
REPLACEMENT = "\ufffd"
# A Python str holds code points: a surrogate in one is always lone (json.loads joins valid pairs).
_SURROGATE = re.compile("[\ud800-\udfff]")


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


def nesting_problem(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """What makes `value` unfit as JSON data (too deep, a lone surrogate, a huge number), or None.

    Iterative: a value nested 100,000 deep is reported, not a RecursionError.
    """
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return f"{path or '/'}: the text holds a lone UTF-16 surrogate, which is not valid Unicode"
        elif isinstance(item, (dict, list, tuple)):
            if depth >= limit:
                return f"{path or '/'}: nested more than {limit} levels deep"
            if isinstance(item, dict):
                for key, sub in item.items():
                    if isinstance(key, str) and has_lone_surrogate(key):
                        return f"{path or '/'}: a key holds a lone UTF-16 surrogate, which is not valid Unicode"
                    stack.append((sub, depth + 1, f"{path}/{key}"))
            else:
                stack.extend((sub, depth + 1, f"{path}/{index}") for index, sub in enumerate(item))
        elif isinstance(item, float) and (item != item or item in (float("inf"), float("-inf"))):
            return f"{path or '/'}: {item} is not a JSON number"
    return None

"""Redaction of sensitive values (passwords, tokens, keys…) before they leave the engine."""

from __future__ import annotations

import re
from typing import Any, Iterable

DEFAULT_SENSITIVE_KEYS = (
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "cookie",
    "credit_card",
    "card_number",
    "cvv",
    "ssn",
    "private_key",
)
REDACTED = "[REDACTED]"


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def normalise_key(key: str) -> str:
    """`apiKey`, `API-Key`, `api key` → `api_key`."""
    return re.sub(r"[\s\-.]+", "_", _CAMEL.sub("_", key)).lower()


class Redactor:
    """Replaces the value of every key named by a sensitive word.

    A key matches when, in snake_case, it is the word, or starts with `word_`, or ends with
    `_word`: `password`, `access_token`, `apiKey`, `X-Api-Key` match; `input_tokens` does not.
    """

    def __init__(self, keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS):
        words = [re.escape(normalise_key(k)) for k in keys if k]
        self._pattern = re.compile(rf"(?:^|_)(?:{'|'.join(words)})(?:_|$)") if words else None
        self._cache: dict[str, bool] = {}

    def is_sensitive(self, key: str) -> bool:
        known = self._cache.get(key)
        if known is None:
            known = self._cache[key] = bool(self._pattern and self._pattern.search(normalise_key(key)))
        return known

    def redact(self, value: Any) -> Any:
        """A redacted copy (only the parts that need it are copied)."""
        if self._pattern is None:
            return value
        if isinstance(value, dict):
            changed = False
            out = {}
            for key, item in value.items():
                if isinstance(key, str) and self.is_sensitive(key) and item is not None:
                    out[key] = REDACTED
                    changed = True
                else:
                    new = self.redact(item)
                    changed = changed or new is not item
                    out[key] = new
            return out if changed else value
        if isinstance(value, list):
            items = [self.redact(item) for item in value]
            return items if any(a is not b for a, b in zip(items, value)) else value
        return value

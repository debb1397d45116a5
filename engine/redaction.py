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
MAX_SAFE_KEYS = 50_000  # the cache of harmless keys stays bounded whatever data flows through


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
        self._safe_keys: set[Any] = set()  # keys seen and found harmless (bounded by the vocabulary of keys)

    def is_sensitive(self, key: str) -> bool:
        known = self._cache.get(key)
        if known is None:
            known = self._cache[key] = bool(self._pattern and self._pattern.search(normalise_key(key)))
        return known

    def redact(self, value: Any) -> Any:
        """A redacted copy, or `value` itself when nothing in it is sensitive (the common case)."""
        if self._pattern is None or not self._needs(value):
            return value
        return self._copy(value)

    def _needs(self, value: Any) -> bool:
        kind = type(value)
        if kind is dict:
            safe = self._safe_keys
            for key, item in value.items():
                if key not in safe:
                    if not isinstance(key, str):
                        continue
                    if self.is_sensitive(key):
                        if item is not None:
                            return True
                        continue
                    if len(safe) < MAX_SAFE_KEYS:
                        safe.add(key)
                item_kind = type(item)
                if (item_kind is dict or item_kind is list) and self._needs(item):
                    return True
            return False
        if kind is list:
            for item in value:
                item_kind = type(item)
                if (item_kind is dict or item_kind is list) and self._needs(item):
                    return True
        return False

    def _copy(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: REDACTED if isinstance(key, str) and item is not None and self.is_sensitive(key) else self._copy(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [self._copy(item) for item in value]
        return value

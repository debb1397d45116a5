"""Redaction of sensitive values (passwords, tokens, keys…) before they leave the engine."""

from __future__ import annotations

import re
from collections.abc import Mapping
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
MIN_SECRET_CHARS = 4  # shorter sensitive values are redacted under their key but not searched for in text
_SCALARS = frozenset({str, int, float, bool, type(None)})


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
            known = bool(self._pattern and self._pattern.search(normalise_key(key)))
            if len(self._cache) < MAX_SAFE_KEYS:
                self._cache[key] = known
        return known

    def schema_is_clean(self, schema: Any) -> bool:
        """True when every value valid against `schema` is free of sensitive keys.

        Only closed schemas qualify: objects with `additionalProperties: false`, no sensitive
        property names, and clean properties; arrays of clean items; plain scalars. Anything
        else (open objects, combinators, $ref) is conservatively "may hold secrets".
        """
        if not isinstance(schema, dict):
            return False
        if "const" in schema or "enum" in schema:
            return all(not isinstance(v, (dict, list)) for v in schema.get("enum", [schema.get("const")]))
        if any(k in schema for k in ("anyOf", "oneOf", "allOf", "$ref", "not", "if", "patternProperties")):
            return False
        kind = schema.get("type")
        kinds = set(kind) if isinstance(kind, list) else {kind}
        if kinds <= {"string", "number", "integer", "boolean", "null"}:
            return True
        if kinds == {"array"}:
            return self.schema_is_clean(schema.get("items")) and not schema.get("prefixItems")
        if kinds == {"object"}:
            properties = schema.get("properties") or {}
            return schema.get("additionalProperties") is False and all(
                not self.is_sensitive(key) and self.schema_is_clean(sub) for key, sub in properties.items()
            )
        return False

    def sensitive_paths(self, value: Any, path: str = "") -> list[str]:
        """JSON Pointers of the sensitive keys in `value` (for refusing such arguments)."""
        found: list[str] = []
        if isinstance(value, Mapping):
            for key, item in value.items():
                where = f"{path}/{key}"
                if isinstance(key, str) and item is not None and self.is_sensitive(key):
                    found.append(where)
                else:
                    found.extend(self.sensitive_paths(item, where))
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                found.extend(self.sensitive_paths(item, f"{path}/{index}"))
        return found

    def for_run(self) -> "RunScrubber":
        """A redactor for the events of one run that also hides the secrets' values in text."""
        return RunScrubber(self)

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
                    if isinstance(key, str):
                        if self.is_sensitive(key):
                            if item is not None:
                                return True
                            continue
                        if len(safe) < MAX_SAFE_KEYS:
                            safe.add(key)
                if type(item) not in _SCALARS and self._needs(item):
                    return True
            return False
        if kind is list or kind is tuple:
            for item in value:
                if type(item) not in _SCALARS and self._needs(item):
                    return True
            return False
        if kind in _SCALARS:
            return False
        if isinstance(value, Mapping):  # OrderedDict, defaultdict, other mappings: the slow path
            return self._needs(dict(value))
        if isinstance(value, (list, tuple)):
            return self._needs(list(value))
        return False

    def _copy(self, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                key: REDACTED if isinstance(key, str) and item is not None and self.is_sensitive(key) else self._copy(item)
                for key, item in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self._copy(item) for item in value]
        return value

    def _collect(self, value: Any, found: set[str], sensitive: bool = False) -> None:
        """The values under sensitive keys, as the strings that could show up in text."""
        if isinstance(value, Mapping):
            for key, item in value.items():
                self._collect(item, found, sensitive or (isinstance(key, str) and item is not None and self.is_sensitive(key)))
        elif isinstance(value, (list, tuple)):
            for item in value:
                self._collect(item, found, sensitive)
        elif sensitive and not isinstance(value, bool) and isinstance(value, (str, int, float)):
            text = str(value)
            if len(text) >= MIN_SECRET_CHARS and text != REDACTED:
                found.add(text)


_NO_SECRETS: frozenset[str] = frozenset()


class RunScrubber:
    """Redaction for the events of one run, in order.

    Like `Redactor.redact`, and it remembers every value it redacted under a sensitive key, so
    that the same value is replaced wherever it appears later in the run: a password rendered
    into a prompt, echoed by a model, or mapped to a step input under a harmless key.
    """

    __slots__ = ("redactor", "secrets", "_regex")

    def __init__(self, redactor: Redactor):
        self.redactor = redactor
        self.secrets: frozenset[str] = _NO_SECRETS  # replaced, never mutated: most runs see none
        self._regex: re.Pattern[str] | None = None

    def known_secrets(self, value: Any) -> Any:
        """For data proven free of sensitive keys: only hide values already seen in this run."""
        return value if self._regex is None else _scrub(value, self._regex)

    def __call__(self, value: Any) -> Any:
        redactor = self.redactor
        if redactor._pattern is not None and redactor._needs(value):
            found: set[str] = set()
            redactor._collect(value, found)
            if not found <= self.secrets:
                self.secrets = self.secrets | found
                ordered = sorted(self.secrets, key=len, reverse=True)  # the longest value wins
                self._regex = re.compile("|".join(re.escape(s) for s in ordered))
            value = redactor._copy(value)
        if self._regex is not None:
            value = _scrub(value, self._regex)
        return value


def _scrub(value: Any, regex: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        return regex.sub(REDACTED, value) if regex.search(value) else value
    if isinstance(value, Mapping):
        return {key: _scrub(item, regex) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(item, regex) for item in value]
    return value

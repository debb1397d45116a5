"""Redaction of sensitive values (passwords, tokens, keys…) before they leave the engine.

Three rules, applied to every event (in `Run.emit`) and every log line:

- the value under a sensitive key (`password`, `apiKey`, `X-Api-Key`…) is replaced;
- in a URL under a URL-ish key (`url`, `final_url`, `location`…), the values of sensitive
  query parameters (`?api_key=…`, `&token=…`) and a userinfo password are replaced;
- the values found by the two rules above, and the configured keys the engine knows (model
  API keys, service keys), are replaced wherever they appear later in the run's text.

Arguments sent as text that is not accepted JSON have no keys to go by: they are not shown at
all (`unparsed_arguments`), only their length.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Mapping
from typing import Any, Iterable
from urllib.parse import unquote

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
# Keys that contain a sensitive word but name a quantity of model tokens, never a credential.
NOT_SENSITIVE_KEYS = frozenset({"token_budget", "token_count", "token_limit", "max_token", "token_usage"})
REDACTED = "[REDACTED]"
MAX_SAFE_KEYS = 50_000  # the cache of harmless keys stays bounded whatever data flows through
MIN_SECRET_CHARS = 4  # shorter sensitive values are redacted under their key but not searched for in text
MIN_CONFIGURED_KEY_CHARS = 8  # a configured "key" like `ollama` is no secret worth hunting in text
_SCALARS = frozenset({str, int, float, bool, type(None)})


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[\W_]+")  # not a letter or digit (Unicode-aware), `_` included
_URL_KEY = re.compile(r"(?:^|_)(?:url|uri|href|link|location|endpoint)$")
_QUERY_PARAM = re.compile(r"([?&;])([^=&#;\s]+)=([^&#;\s]*)")
_USERINFO = re.compile(r"(://[^/?#@:\s]*:)([^/?#@\s]+)(@)")


def normalise_key(key: str) -> str:
    """`apiKey`, `API-Key`, `api key`, `auth:token`, `${env:X_TOKEN}` → snake_case words.

    Any run of characters that are not letters or digits separates words, whatever the
    punctuation (`.`, `-`, `:`, `/`, `[`, `${…}`), so the verdict never hangs on it; a single
    character class, linear on any key."""
    return _SEPARATORS.sub("_", _CAMEL.sub("_", key)).strip("_").lower()


class Redactor:
    """Replaces the value of every key named by a sensitive word.

    A key matches when, in snake_case, it is the word, or starts with `word_`, or ends with
    `_word`: `password`, `access_token`, `apiKey`, `X-Api-Key` match; `input_tokens` does not.
    """

    def __init__(self, keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS):
        words = [re.escape(normalise_key(k)) for k in keys if k]
        self._pattern = re.compile(rf"(?:^|_)(?:{'|'.join(words)})(?:_|$)") if words else None
        self._cache: dict[str, bool] = {}
        self._url_keys: dict[str, bool] = {}
        self._safe_keys: set[Any] = set()  # keys seen and found harmless (bounded by the vocabulary of keys)
        self.configured: frozenset[str] = _NO_SECRETS  # keys the engine knows (models, service): see set_configured
        self.configured_regex: re.Pattern[str] | None = None

    def set_configured(self, values: Iterable[str]) -> None:
        """Secret values known from configuration (API keys): hidden in every run's text from the start.

        Called at load time, never per call; the regex is built here once.
        """
        found = frozenset(v for v in values if isinstance(v, str) and len(v) >= MIN_CONFIGURED_KEY_CHARS)
        self.configured_regex = _secrets_regex(found) if found else None
        self.configured = found

    def hide_configured(self, value: Any) -> Any:
        """`value` (what a tool hands its caller) with each configured secret (the operator's: read
        by reference, model and service keys) replaced wherever it shows; `value` itself when
        none does, and a dict of its own type (a fetch result) rebuilt as that type."""
        regex = self.configured_regex
        return value if regex is None else _hidden_in(value, regex)

    def is_sensitive(self, key: str) -> bool:
        known = self._cache.get(key)
        if known is None:
            normal = normalise_key(key)
            known = bool(self._pattern and normal not in NOT_SENSITIVE_KEYS and self._pattern.search(normal))
            if len(self._cache) < MAX_SAFE_KEYS:
                self._cache[key] = known
        return known

    def is_url_key(self, key: str) -> bool:
        """`url`, `final_url`, `callbackUri`, `location`…: a value that may be a URL with a query."""
        known = self._url_keys.get(key)
        if known is None:
            known = bool(_URL_KEY.search(normalise_key(key)))
            if len(self._url_keys) < MAX_SAFE_KEYS:
                self._url_keys[key] = known
        return known

    def redact_url(self, url: str) -> str:
        """`url` with the values of sensitive query parameters and any userinfo password replaced."""
        if self._pattern is None or ("?" not in url and "@" not in url):
            return url

        def param(match: re.Match[str]) -> str:
            sep, name, value = match.groups()
            if value and value != REDACTED and self.is_sensitive(unquote(name)):
                return f"{sep}{name}={REDACTED}"
            return match.group(0)

        return _USERINFO.sub(rf"\g<1>{REDACTED}\g<3>", _QUERY_PARAM.sub(param, url))

    def url_secrets(self, url: str) -> list[str]:
        """The secret values in `url` (sensitive query parameters, a userinfo password), as written."""
        if self._pattern is None or ("?" not in url and "@" not in url):
            return []
        found = [m.group(3) for m in _QUERY_PARAM.finditer(url)
                 if m.group(3) and m.group(3) != REDACTED and self.is_sensitive(unquote(m.group(2)))]
        found.extend(m.group(2) for m in _USERINFO.finditer(url) if m.group(2) != REDACTED)
        return found

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
                not self.is_sensitive(key) and not self.is_url_key(key) and self.schema_is_clean(sub)
                for key, sub in properties.items()
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

    def redact_found(self, value: Any) -> tuple[Any, frozenset[str] | set[str]]:
        """`redact(value)`, and the values it replaced (under sensitive keys, in URLs' queries)
        as the strings that could show up in text later (none: an empty frozenset)."""
        if self._pattern is None or not self._needs(value):
            return value, _NO_SECRETS
        found: set[str] = set()
        self._collect(value, found)
        return self._copy(value), found

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
                        if self.is_url_key(key):  # never cached as safe: its value decides
                            if type(item) is str and self.url_secrets(item):
                                return True
                        elif len(safe) < MAX_SAFE_KEYS:
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
            return {key: self._copy_item(key, item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._copy(item) for item in value]
        return value

    def _copy_item(self, key: Any, item: Any) -> Any:
        if isinstance(key, str) and item is not None:
            if self.is_sensitive(key):
                return REDACTED
            if type(item) is str and self.is_url_key(key):
                return self.redact_url(item)
        return self._copy(item)

    def _collect(self, value: Any, found: set[str], sensitive: bool = False) -> None:
        """The values under sensitive keys, as the strings that could show up in text."""
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not sensitive and isinstance(key, str) and type(item) is str and self.is_url_key(key):
                    found.update(s for s in self.url_secrets(item) if len(s) >= MIN_SECRET_CHARS)
                    continue
                self._collect(item, found, sensitive or (isinstance(key, str) and item is not None and self.is_sensitive(key)))
        elif isinstance(value, (list, tuple)):
            for item in value:
                self._collect(item, found, sensitive)
        elif sensitive and not isinstance(value, bool) and isinstance(value, (str, int, float)):
            text = str(value)
            if len(text) >= MIN_SECRET_CHARS and text != REDACTED:
                found.add(text)


_NO_SECRETS: frozenset[str] = frozenset()


def unparsed_arguments(text: str | bytes) -> str:
    """What a sink shows of argument text no JSON reader accepted: its length, never its content.

    Not a scrubber: text that does not parse has no keys to trust (a truncated string, a key
    written `"pass\\u0077ord"` or `password: …` without quotes), so no rule could tell its
    secrets apart; the call's error event says what was wrong and where (line and column).
    A placeholder given again is returned as it is (a store fed events the engine redacted).
    """
    if isinstance(text, str) and _UNPARSED.fullmatch(text):
        return text
    return f"[unparsed arguments: {len(text)} chars]"


_UNPARSED = re.compile(r"\[unparsed arguments: \d+ chars\]")


def secret_hider(secrets: Iterable[str]) -> "Callable[[str], str]":
    """Free text with each of `secrets` (the values a load read by reference) replaced: for what
    a load says about itself (config problems, warnings), which no run's scrubber sees."""
    found = [s for s in secrets if isinstance(s, str) and len(s) >= MIN_CONFIGURED_KEY_CHARS]
    if not found:
        return _same_text
    regex = _secrets_regex(found)
    return lambda text: regex.sub(REDACTED, text) if regex.search(text) else text


def _same_text(text: str) -> str:
    return text


def _secrets_regex(secrets: Iterable[str]) -> re.Pattern[str]:
    ordered = sorted(secrets, key=len, reverse=True)  # the longest value wins
    return re.compile("|".join(re.escape(s) for s in ordered))


class RunScrubber:
    """Redaction for the events of one run, in order.

    Like `Redactor.redact`, and it remembers every value it redacted under a sensitive key (or
    in a URL's query), so that the same value is replaced wherever it appears later in the run:
    a password rendered into a prompt, echoed by a model, or mapped to a step input under a
    harmless key. The configured keys (`Redactor.configured`) are known from the start.
    """

    __slots__ = ("redactor", "secrets", "regex")

    def __init__(self, redactor: Redactor):
        self.redactor = redactor
        self.secrets: frozenset[str] = redactor.configured  # replaced, never mutated: most runs see none
        self.regex: re.Pattern[str] | None = redactor.configured_regex  # built only when a run has secrets

    def known_secrets(self, value: Any) -> Any:
        """For data proven free of sensitive keys: only hide values already seen in this run."""
        return value if self.regex is None else scrub_text(value, self.regex)

    def text(self, text: str) -> str:
        """Free text (an error message) with the run's known secrets replaced."""
        regex = self.regex
        return regex.sub(REDACTED, text) if regex is not None and regex.search(text) else text

    def stream(self) -> "TextStream":
        """A holdback for streamed text, so that a secret split across two pieces is still caught."""
        return TextStream(self)

    def __call__(self, value: Any) -> Any:
        value, found = self.redactor.redact_found(value)
        if not found <= self.secrets:
            self.secrets = self.secrets | found
            self.regex = _secrets_regex(self.secrets)
        if self.regex is not None:
            value = scrub_text(value, self.regex)
        return value


class TextStream:
    """Streamed text (a model's deltas) with the run's known secrets replaced across pieces.

    `push(piece)` returns what may be shown now; the tail that could be the start of a secret
    is held back until the next piece decides it. `flush()` returns what is still held.
    Without known secrets nothing is held and each piece passes as it is.
    """

    __slots__ = ("scrubber", "held")

    def __init__(self, scrubber: RunScrubber):
        self.scrubber = scrubber
        self.held = ""

    def push(self, piece: str) -> str:
        scrubber = self.scrubber
        if scrubber.regex is None:
            return piece
        text = scrubber.text(self.held + piece)
        keep = _secret_prefix_at_end(text, scrubber.secrets)
        self.held = text[len(text) - keep:] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        held, self.held = self.held, ""
        return held


def _secret_prefix_at_end(text: str, secrets: Iterable[str]) -> int:
    """The length of the longest end of `text` that is the start (not the whole) of a secret."""
    best = 0
    for secret in secrets:
        for length in range(min(len(secret) - 1, len(text)), best, -1):
            if text.endswith(secret[:length]):
                best = length
                break
    return best


_ACTIVE: contextvars.ContextVar[RunScrubber | None] = contextvars.ContextVar("skillyard_active_run", default=None)


def active_scrubber() -> RunScrubber | None:
    """The scrubber of the run this code runs in (for log lines written during a call)."""
    return _ACTIVE.get()


# Mark the current context as running a run (`token = enter_run(scrubber)`), and undo it
# (`leave_run(token)`): the ContextVar's own C methods, no Python frame on the per-call path.
enter_run = _ACTIVE.set
leave_run = _ACTIVE.reset


def _hidden_in(value: Any, regex: re.Pattern[str]) -> Any:
    """`scrub_text` that keeps `value` itself where nothing matched, and the type of a dict."""
    if isinstance(value, str):
        return regex.sub(REDACTED, value) if regex.search(value) else value
    if isinstance(value, Mapping):
        items = {key: _hidden_in(item, regex) for key, item in value.items()}
        if all(items[key] is item for key, item in value.items()):
            return value
        try:
            return type(value)(items) if isinstance(value, dict) else items
        except Exception:  # noqa: BLE001 - a dict type that cannot be rebuilt from its items: plain data
            return items
    if isinstance(value, (list, tuple)):
        hidden = [_hidden_in(item, regex) for item in value]
        return value if all(a is b for a, b in zip(hidden, value, strict=True)) else hidden
    return value


def scrub_text(value: Any, regex: re.Pattern[str]) -> Any:
    """A copy of `value` with every match of `regex` in its strings replaced."""
    if isinstance(value, str):
        return regex.sub(REDACTED, value) if regex.search(value) else value
    if isinstance(value, Mapping):
        return {key: scrub_text(item, regex) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_text(item, regex) for item in value]
    return value

"""The `mock` provider: the offline default.

Deterministic (same request → same answer), streamed in small chunks, and derived from the
request: JSON answers are built from the requested schema and filled with phrases taken
from the last user message, so different inputs give different, schema-valid outputs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Any, Callable

from . import mock_chat
from .base import ChatMessage, ModelRequest, ModelResponse, ToolCall, Usage
from .mock_text import Material, capitalised, read, role_of

CHUNK_CHARS = 24
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#./-]*[A-Za-z0-9+#]|[A-Za-z]{2,}")
_STOP = frozenset(
    "the and for with you your our are will this that from have has who what when where which into about "
    "able must should would could their them they was were been being any all can not but nor also such "
    "per via etc its it's out use using work working team teams role job year years experience plus "
    "strong good great knowledge skills skill including include includes".split()
)


def vocabulary(text: str) -> list[str]:
    """Distinctive words of the text first (PostgreSQL, CI/CD, C++, mid-sentence capitals)."""
    first_seen: dict[str, tuple[bool, int, str]] = {}
    for match in _WORD.finditer(text):
        word = match.group().strip("./-")
        key = word.lower()
        if len(key) < 2 or key in _STOP:
            continue
        start = match.start()  # the character before the word, spaces and quotes aside (no copy of the text)
        while start and text[start - 1] in " \t\"'(":
            start -= 1
        sentence_start = not start or text[start - 1] in ".!?:\n-*•"
        distinctive = _distinctive(word, sentence_start)
        known = first_seen.get(key)
        if known is None or (distinctive and not known[0]):
            first_seen[key] = (distinctive, known[1] if known else match.start(), word)
    ranked = sorted(first_seen.values(), key=lambda item: (not item[0], item[1]))
    return [word for _, _, word in ranked] or ["input"]


def _distinctive(word: str, sentence_start: bool) -> bool:
    if any(c.isdigit() or c in "+#/" for c in word) or any(c.isupper() for c in word[1:]):
        return True
    return word[0].isupper() and not sentence_start


class MockProvider:
    """Answers from the request alone; no network, no randomness."""

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        prompt = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        words = vocabulary(prompt)
        calls: tuple[ToolCall, ...] = ()
        answered = _answered_since_user(request.messages)
        tool = None
        if request.tools and request.tool_choice != "none" and not answered:
            tool = mock_chat.choose_tool(request.tools, prompt, request.tool_choice)
        if tool is not None:
            calls = (self._tool_call(tool, prompt, words),)
            text = ""
        elif answered:
            text = _summarise_observations(request.messages)
        elif request.output_schema is not None:
            seed = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:4], "big")
            value = SchemaFiller(request.output_schema, words, seed, read(prompt)).fill()
            text = json.dumps(value, ensure_ascii=False, indent=2)
        elif request.tools:
            text = mock_chat.greeting(request.tools, prompt)
        else:
            text = "Mock answer about " + ", ".join(words[:8]) + "."
        if on_text is not None:
            for start in range(0, len(text), CHUNK_CHARS):
                on_text(text[start : start + CHUNK_CHARS])
                await asyncio.sleep(0)  # let other tasks run, as a real stream would
        input_chars = sum(len(m.content) for m in request.messages)
        usage = Usage(max(1, input_chars // 4), max(1, len(text) // 4))
        return ModelResponse(text, usage, "tool_calls" if calls else "stop", calls)

    @staticmethod
    def _tool_call(tool: dict[str, Any], prompt: str, words: list[str]) -> ToolCall:
        """Call `tool` with the arguments the message holds (made-up ones only where it holds none)."""
        schema = tool.get("parameters") or {}
        seed = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:4], "big")
        filler = SchemaFiller(schema, words, seed)
        arguments = mock_chat.extract_arguments(schema, prompt, lambda sub, name: filler.value(sub, name, 0, 1))
        call_id = "call_mock_" + hashlib.sha256((tool["name"] + prompt).encode()).hexdigest()[:12]
        return ToolCall(call_id, tool["name"], json.dumps(arguments, ensure_ascii=False))


def _answered_since_user(messages: tuple[ChatMessage, ...]) -> bool:
    for message in reversed(messages):
        if message.role == "tool":
            return True
        if message.role == "user":
            return False
    return False


def _summarise_observations(messages: tuple[ChatMessage, ...]) -> str:
    """A final answer that says what the tools of this turn returned (the mock cannot reason about it)."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    observations = [(m.name or "the tool", m.content, m.is_error) for m in messages[start + 1:] if m.role == "tool"]
    return mock_chat.summarise(observations)


MAX_FILL_NODES = 10_000  # values one answer builds
MAX_FILL_CHARS = 10_000  # characters one string is grown to, whatever its minLength


class FillBudget:
    """What one schema fill may spend: the schema is the caller's (a `$ref` fan-out grows a
    2.8 KB schema to a million values, `minItems: 1e9` is one keyword), so filling stops —
    leaving the rest empty — once MAX_FILL_NODES values are built (about 25 ms of the event
    loop). A count, not a clock: the mock's answer to one prompt is the same on a busy machine."""

    def __init__(self, nodes: int = MAX_FILL_NODES):
        self.left = nodes

    def take(self) -> bool:
        """Spend one value; False once the budget is spent."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    @property
    def spent(self) -> bool:
        return self.left <= 0


class SchemaFiller:
    """Builds a value valid against a JSON Schema from the prompt's own phrases.

    Where a property's name or description says what it holds (a title, a list of required
    skills, a day's focus, its tasks) the matching phrases of the prompt go there; anything
    else draws words from the vocabulary. Counts, bounds and enums are respected, within a
    `FillBudget` (past it, the value is cut short and the answer fails its schema).
    """

    def __init__(self, root: dict[str, Any], words: list[str], seed: int, material: Material | None = None):
        self.budget = FillBudget()
        self.root = root
        self.words = words
        self.counter = seed % len(words)
        self.material = material or Material(" ".join(words[:6]), [], words)
        self.topic: str | None = None  # the item of a list of objects being filled (a day's skill)
        self.used: set[int] = set()  # phrases handed out already (each used once while any is left)

    def fill(self) -> Any:
        return self.value(self.root, "value", 0, 0)

    def _resolve(self, schema: Any) -> Any:
        for _ in range(16):
            if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/")):
                break
            node: Any = self.root
            for part in schema["$ref"][2:].split("/"):
                node = node.get(part, {}) if isinstance(node, dict) else {}
            schema = node
        return schema

    def _word(self) -> str:
        word = self.words[self.counter % len(self.words)]
        self.counter += 1
        return word

    def value(self, schema: Any, name: str, index: int, depth: int) -> Any:
        if not self.budget.take():
            return None
        schema = self._resolve(schema)
        if not isinstance(schema, dict) or depth > 12:
            return None if schema is not True else self._word()
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][index % len(schema["enum"])]
        for combinator in ("oneOf", "anyOf"):
            if schema.get(combinator):
                return self.value(schema[combinator][0], name, index, depth + 1)
        if schema.get("allOf"):
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                merged.update(self._resolve(part) or {})
            return self.value(merged, name, index, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        return getattr(self, f"_{kind}", self._null)(schema, name, index, depth)

    def _object(self, schema: dict[str, Any], name: str, index: int, depth: int) -> Any:
        properties = dict(schema.get("properties") or {})
        extra = schema.get("additionalProperties")
        for key in schema.get("required") or []:
            properties.setdefault(key, extra if isinstance(extra, dict) else {"type": "string"})
        out = {key: self.value(sub, key, index, depth + 1) for key, sub in properties.items()}
        filler = 0
        while len(out) < schema.get("minProperties", 0) and extra is not False and not self.budget.spent:
            filler += 1
            out[f"extra{filler}"] = self.value(extra if isinstance(extra, dict) else {"type": "string"}, "extra", filler, depth + 1)
        return out

    def _array(self, schema: dict[str, Any], name: str, index: int, depth: int) -> Any:
        items = self._resolve(schema.get("items", {}))
        prefix = schema.get("prefixItems") or []
        low = schema.get("minItems", 0)
        high = schema.get("maxItems")
        if not prefix and isinstance(items, dict) and items.get("type") == "string" and not items.get("enum") \
                and not items.get("format") and not items.get("pattern"):
            phrases = self._phrases(name, schema.get("description", ""))
            count = max(low, min(len(phrases), high if high is not None else 6))
            out = []
            for i in range(count):
                if not self.budget.take():
                    break
                out.append(self._fit(phrases[i % len(phrases)] if phrases else self._word(), items, i))
        else:
            of_objects = not prefix and isinstance(items, dict) and (items.get("type") == "object" or "properties" in items)
            topics = self.material.topics
            count = max(low, min(len(topics) if of_objects else 3, high if high is not None else 5 if of_objects else 3))
            out = []
            outer = self.topic
            for i in range(count):
                if self.budget.spent:
                    break
                if of_objects:  # one topic per item: a plan's day, a list's entry
                    self.topic = topics[i % len(topics)]
                out.append(self.value(prefix[i] if i < len(prefix) else items, name, i, depth + 1))
            self.topic = outer
        if schema.get("uniqueItems"):
            taken: set[str] = set()
            unique: list[Any] = []
            for i, item in enumerate(out):
                if isinstance(item, str):
                    item = f"{item} ({i + 1})" if item in taken else item
                    taken.add(item)
                unique.append(item)
            out = unique
        return out

    def _phrases(self, name: str, description: str) -> list[str]:
        """What a list of strings named `name` holds: a day's tasks, a labelled list of the prompt,
        or phrases not handed out yet."""
        topic = self.topic
        if topic is not None and role_of(name, description) == "tasks":
            return [f"Review {topic}", f"Practise {topic} on a small hands-on exercise",
                    f"Prepare a short story from your own work about {topic}"]
        section = self.material.section_for(name, description, any_section=True)
        if section is not None:
            return section.items
        return self._fresh_phrases(3)

    def _fresh_phrases(self, count: int) -> list[str]:
        phrases = self.material.phrases
        usable = [i for i, phrase in enumerate(phrases) if phrase != self.material.title] or list(range(len(phrases)))
        fresh = [i for i in usable if i not in self.used] or usable
        chosen = fresh[:count]
        self.used.update(chosen)
        return [phrases[i] for i in chosen]

    def _fit(self, text: str, schema: dict[str, Any], index: int) -> str:
        low, high = min(schema.get("minLength", 0), MAX_FILL_CHARS), schema.get("maxLength")
        parts, length = [text], len(text)
        while length < low:
            parts.append(self._word())
            length += 1 + len(parts[-1])
        text = " ".join(parts)
        return text[:high] if high is not None else text

    def _string(self, schema: dict[str, Any], name: str, index: int, depth: int) -> str:
        fmt = schema.get("format")
        if fmt == "date":
            return f"2026-01-{index % 28 + 1:02d}"
        if fmt == "date-time":
            return f"2026-01-{index % 28 + 1:02d}T09:00:00Z"
        if fmt in ("uri", "url"):
            return f"https://example.com/{self._word().lower()}"
        if fmt == "email":
            return f"{self._word().lower()}@example.com"
        return self._fit(self._text_for(name, schema.get("description", "")), schema, index)

    def _text_for(self, name: str, description: str) -> str:
        """The phrase a string property named `name` should hold."""
        role, topic, material = role_of(name, description), self.topic, self.material
        if topic is not None:
            if role == "deliverable":
                return f"Notes and one worked example on {topic}"
            if role == "summary":
                return f"A day on {topic}"
            if role in ("focus", "title") or role is None:
                return capitalised(topic)
        if role == "title":
            return material.title
        if role == "summary":
            listed = ", ".join(material.topics[:4])
            return f"{material.title}: {listed}" if listed and listed != material.title else material.title
        section = material.section_for(name, description)
        if section is not None:
            return section.items[0]
        fresh = self._fresh_phrases(1)
        return fresh[0] if fresh else self._word()

    def _number(self, schema: dict[str, Any], name: str, index: int, depth: int) -> float:
        return float(self._integer(schema, name, index, depth))

    def _integer(self, schema: dict[str, Any], name: str, index: int, depth: int) -> int:
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1 if "exclusiveMinimum" in schema else 1)
        high = schema.get("maximum", schema.get("exclusiveMaximum", 0) - 1 if "exclusiveMaximum" in schema else None)
        step = schema.get("multipleOf", 1)
        step = int(step) if float(step).is_integer() and step >= 1 else 1
        value = -(-int(low) // step) * step + index * step  # the first multiple ≥ low, then the index-th after it
        if high is not None and value > high:
            value = (int(high) // step) * step
        return value

    def _boolean(self, schema: dict[str, Any], name: str, index: int, depth: int) -> bool:
        return index % 2 == 0

    def _null(self, schema: dict[str, Any], name: str, index: int, depth: int) -> None:
        return None

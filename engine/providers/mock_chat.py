"""How the offline `mock` model behaves in a chat: when it calls a tool, with which arguments,
and how it reports what the tool returned.

No AI, but no nonsense either: a tool is called only when the message shares words with the
tool's name and description (or carries what the tool needs, such as a URL); arguments are
read out of the message by the tool's schema (a URL for a `format: uri` field, a number near
the field's name, the pasted text for a text field); the answer after a tool call is a short
readable summary of the result, cut between items and never in the middle of one.
Deterministic: the same messages give the same answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

_URL = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
# A match starts only where a run of address characters does: one scan per run, not one per character.
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_QUOTED = re.compile(r"[\"“']([^\"”']{2,200})[\"”']")
_TOKEN = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
_GREETING = re.compile(
    r"^\s*(hi|hello|hey|hiya|howdy|yo|greetings|good (morning|afternoon|evening|day)|thanks|thank you|"
    r"how are you|what can you do|help)\b", re.IGNORECASE)
_STOP = frozenset(
    "a an the and or for with to of in on at by from into about this that these those it its is are be was were "
    "me my you your we our i please can could would will should do does did make get give show tell let use "
    "what which who how why when where any some all more most less than then there here just also very so "
    "hi hello hey thanks thank".split())
_TEXT_FIELDS = ("text", "content", "body", "document", "description", "message", "jd", "input", "source", "page")
_LONG_MESSAGE = 240  # characters: a message this long is likely the material a text tool works on


def words(text: str) -> set[str]:
    """Content words of a text or a camelCase name, reduced to a 5-letter stem (analyse = analyze)."""
    out = set()
    for token in _TOKEN.findall(text):
        token = token.lower()
        if len(token) >= 3 and token not in _STOP and not token.isdigit():
            out.add(token[:5])
    return out


def is_greeting(message: str) -> bool:
    return bool(_GREETING.match(message)) and len(message) < 80


def choose_tool(tools: tuple[dict[str, Any], ...], message: str, choice: str) -> dict[str, Any] | None:
    """The tool the message plausibly asks for, or None (a greeting, an unrelated question).

    `required` always picks the best-scoring tool; a named tool_choice picks that tool.
    """
    named = [t for t in tools if t["name"] == choice]
    if named:
        return named[0]
    scored = sorted(((_score(t, message), index) for index, t in enumerate(tools)), key=lambda s: (-s[0], s[1]))
    best, index = scored[0]
    if choice == "required" or (best > 0 and not is_greeting(message)):
        return tools[index]
    return None


def _score(tool: dict[str, Any], message: str) -> float:
    schema = tool.get("parameters") or {}
    shared = words(message) & words(tool["name"] + " " + tool.get("description", ""))
    score = float(len(shared))
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        sub = properties.get(name)
        sub = sub if isinstance(sub, dict) else {}
        if _is_url(name, sub):
            if not _URL.search(message):
                return 0.0  # it cannot be called without a URL the message does not hold
            score += 2
    return score


def _is_url(name: str, schema: dict[str, Any]) -> bool:
    return schema.get("format") in ("uri", "url", "iri", "uri-reference") or name.lower() in ("url", "uri", "link", "href") \
        or name.lower().endswith(("url", "uri"))


def extract_arguments(schema: dict[str, Any], message: str, fill: Any) -> dict[str, Any]:
    """The tool's arguments read out of the message by its schema.

    A required field the message does not hold is made up by `fill(subschema, name)` (the
    schema filler), so the call is valid; an optional one is left out.
    """
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    arguments: dict[str, Any] = {}
    for name, sub in properties.items():
        sub = sub if isinstance(sub, dict) else {}
        found = _find(name, sub, message, required)
        if found is not None:
            arguments[name] = found
        elif name in required:
            arguments[name] = fill(sub, name)
    return arguments


def _find(name: str, schema: dict[str, Any], message: str, required: set[str]) -> Any:
    kind = schema.get("type")
    if schema.get("enum"):
        lowered = message.lower()
        return next((v for v in schema["enum"] if isinstance(v, str) and v.lower() in lowered), None)
    if kind in ("integer", "number"):
        return _number_near(name, schema, message)
    if kind not in (None, "string"):
        return None
    if _is_url(name, schema):
        match = _URL.search(message)
        return match.group().rstrip(".,;:!?)]}") if match else None
    fmt = schema.get("format")
    if fmt == "email" or "email" in name.lower():
        match = _EMAIL.search(message)
        return match.group() if match else None
    if fmt == "date":
        match = _DATE.search(message)
        return match.group() if match else None
    if fmt:
        return None
    if name not in required:
        return None  # an optional free-text field: a message rarely says what belongs there
    return _fit(_text_for(name, schema, message), schema)


def _text_for(name: str, schema: dict[str, Any], message: str) -> str:
    """The part of the message a text field holds: the material after `…:` for a text/document field
    when there is some, a quoted phrase, or the request without its leading verbs."""
    about = (name + " " + schema.get("description", "")).lower()
    head, sep, rest = message.partition(":")
    if sep and len(rest.strip()) >= 20 and "//" not in head[-6:] + rest[:2] and len(head) < 120:
        return rest.strip()
    if any(word in about for word in _TEXT_FIELDS) or len(message) >= _LONG_MESSAGE:
        return message.strip()
    quoted = _QUOTED.search(message)
    if quoted:
        return quoted.group(1).strip()
    return message.strip()


def _fit(text: str, schema: dict[str, Any]) -> str:
    high = schema.get("maxLength")
    return text[:high] if isinstance(high, int) else text


def _number_near(name: str, schema: dict[str, Any], message: str) -> float | int | None:
    """A number written next to a word of the field's name (`top 3` for topN, `5 days` for days)."""
    stems = words(name + " " + schema.get("description", ""))
    for match in _NUMBER.finditer(message):
        around = message[max(0, match.start() - 24): match.end() + 24]
        if stems & words(around):
            value = float(match.group())
            value = int(value) if schema.get("type") == "integer" and value.is_integer() else value
            if schema.get("type") == "integer" and not isinstance(value, int):
                continue
            low, high = schema.get("minimum"), schema.get("maximum")
            if (low is None or value >= low) and (high is None or value <= high):
                return value
    return None


def greeting(tools: tuple[dict[str, Any], ...], message: str) -> str:
    """The answer to a message that asks for no tool: a greeting back, and what the tools can do."""
    opening = "Hello!" if is_greeting(message) else "I did not find a tool for that request."
    if not tools:
        return f"{opening} I am `mock`, the offline stand-in model; I have no tools in this chat."
    listed = "\n".join(f"- {t['name']}: {_first_sentence(t.get('description', ''))}" for t in tools[:10])
    return (f"{opening} I am `mock`, the offline stand-in model (no AI). Ask for one of these tools by what it does:\n"
            f"{listed}")


def _first_sentence(text: str) -> str:
    sentence = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    return sentence if len(sentence) <= 160 else sentence[:159] + "…"


# ─── the answer after tool calls ──────────────────────────────────────────────────────


def summarise(observations: list[tuple[str, str, bool]], budget: int = 2400) -> str:
    """A readable answer from (tool name, what the model read back, failed) triples."""
    parts = []
    for name, content, failed in observations[-4:]:
        header, _, body = content.partition("\n")
        if failed:
            parts.append(f"The call of {name} failed: {header.strip('[]')} {body.strip()}".strip())
            continue
        parts.append(f"{name} returned:\n" + describe(body.strip(), budget // max(1, len(observations[-4:]))))
    return "\n\n".join(parts)


def describe(body: str, budget: int) -> str:
    """`body` (JSON or text) said in at most about `budget` characters, cut between items."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return _text_excerpt(body, budget)
    lines = list(_lines(value, 0))
    out: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) > budget and out:
            out.append(f"… ({len(lines) - len(out)} more lines)")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def _lines(value: Any, depth: int) -> Any:
    pad = "  " * depth
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item and not _is_flat_list(item):
                yield f"{pad}- {key}:" + (f" {len(item)} items" if isinstance(item, list) else "")
                if depth < 3:
                    yield from _lines(item, depth + 1)
            elif isinstance(item, str) and "\n" in item.strip():  # a Markdown report reads best as itself
                yield f"{pad}- {key}:"
                yield from _block(item, pad + "    ")
            else:
                yield f"{pad}- {key}: {_scalar(item)}"
    elif isinstance(value, list):
        if _is_flat_list(value):
            yield f"{pad}- {_scalar(value)}"
            return
        for index, item in enumerate(value, 1):
            if isinstance(item, dict):
                yield f"{pad}{index}. " + "; ".join(f"{k}: {_brief(v)}" for k, v in list(item.items())[:4])
            else:
                yield f"{pad}{index}. {_scalar(item)}"
    elif isinstance(value, str) and "\n" in value.strip():
        yield from _block(value, pad)
    else:
        yield f"{pad}{_scalar(value)}"


def _block(text: str, pad: str, most: int = 16) -> Any:
    lines = [line for line in text.strip().splitlines()]
    for line in lines[:most]:
        yield f"{pad}{line}" if line.strip() else ""
    if len(lines) > most:
        yield f"{pad}… ({len(lines) - most} more lines)"


def _brief(value: Any) -> str:
    """A field of a list item in a few words: a list shows its first entry and how many more."""
    if isinstance(value, list) and value:
        more = f" (+{len(value) - 1} more)" if len(value) > 1 else ""
        return _scalar(value[0], 70) + more
    return _scalar(value, 90)


def _is_flat_list(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(item, (dict, list)) for item in value)


def _scalar(value: Any, width: int = 160) -> str:
    if isinstance(value, list):
        shown = [_scalar(v, 60) for v in value[:5]]
        more = f" (+{len(value) - 5} more)" if len(value) > 5 else ""
        return ", ".join(shown) + more if shown else "(none)"
    if isinstance(value, dict):
        return f"{len(value)} fields"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _text_excerpt(text: str, budget: int) -> str:
    """The start of a text, ending at a line or sentence end within the budget."""
    if len(text) <= budget:
        return text
    cut = text[:budget]
    end = max(cut.rfind("\n"), cut.rfind(". "))
    cut = cut[: end + 1] if end > budget // 3 else cut
    return cut.rstrip() + f"\n… ({len(text) - len(cut.rstrip()):,} more characters)"

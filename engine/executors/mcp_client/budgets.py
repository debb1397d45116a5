"""How much of what an MCP server sends is taken: a server is untrusted input, like a caller.

Each figure bounds one thing a hostile server could make unbounded: the text a run records
(log and progress messages, stderr lines), what every agent request carries (a tool's
description, title and inputSchema), and how much its sampling requests may send to a model and
how many tokens they may spend.
"""

from __future__ import annotations

from typing import Any

from ...lang.schema_budget import DEFAULT_MAX_SCHEMA_BYTES, schema_over_budget

MAX_TEXT = 4000  # characters kept of one log message, progress message or stderr line
MAX_DESCRIPTION_BYTES = 4 * 1024  # a tool's description or title (UTF-8)
MAX_INPUT_SCHEMA_BYTES = DEFAULT_MAX_SCHEMA_BYTES  # a tool's inputSchema or a question's schema, as JSON
SAMPLING_MAX_TOKENS = 4096  # a sampling request's ceiling when the answering model sets no max_tokens
LIST_CHANGED_DEBOUNCE = 1.0  # seconds a `tools/list_changed` waits for more before the tools are listed again


def cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def tool_size_problem(description: str | None, title: str | None, input_schema: Any) -> str | None:
    """What about a listed tool is too big to hand to a model, or None."""
    for field, text in (("description", description), ("title", title)):
        size = len(text.encode("utf-8", "replace")) if text else 0
        if size > MAX_DESCRIPTION_BYTES:
            return f"its {field} is {size:,} bytes, past the limit of {MAX_DESCRIPTION_BYTES:,}"
    problem = schema_size_problem(input_schema)
    return None if problem is None else f"its inputSchema is refused: {problem}"


def schema_size_problem(schema: Any) -> str | None:
    """A schema a server sent (a tool's inputSchema, an elicitation's requestedSchema) over the
    budget every schema from outside has (size, depth, $ref fan-out; lang/schema_budget.py)."""
    return schema_over_budget(schema, MAX_INPUT_SCHEMA_BYTES)


def sampling_max_tokens(asked: int, model_max: int | None) -> int:
    """A server's `maxTokens`, never above the answering model's own `max_tokens`."""
    return max(1, min(asked, model_max or SAMPLING_MAX_TOKENS))


def sampling_input_problem(params: Any, limit: int) -> str | None:
    """Why a sampling request's messages (their text, and the system prompt) are too big for
    `limit` characters together (`sampling.max_input_chars`), or None; counting stops past it."""
    chars = len(params.system_prompt or "")
    for message in params.messages:
        if chars > limit:
            break
        chars += len(getattr(message.content, "text", "") or "")
    if chars <= limit:
        return None
    return (f"its messages hold more than {limit:,} characters, its limit (sampling.max_input_chars in "
            "config/mcp.yaml); no model was asked")

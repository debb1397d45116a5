"""The OpenAI chat format, the one shape a transcript takes outside the engine, and the
engine's ChatMessage mapped onto it one to one.

Kept apart from the `openai` provider so that reading or writing a transcript (sessions,
AgentResult, POST /v1/agent) does not import the OpenAI SDK.
"""

from __future__ import annotations

from typing import Any

from .base import ChatMessage, ToolCall


def to_openai_messages(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    """Engine messages → chat-completions `messages`."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content})
        elif message.role == "assistant" and message.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [
                        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                        for c in message.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": message.role, "content": message.content})
    return out


def from_openai_message(message: dict[str, Any]) -> ChatMessage:
    """A chat-completions message → the engine's ChatMessage (the other direction of the adapter)."""
    role = message["role"]
    content = content_text(message.get("content"))
    if role == "tool":
        return ChatMessage("tool", content, tool_call_id=message.get("tool_call_id"))
    calls = tuple(
        ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments") or "")
        for c in message.get("tool_calls") or []
    )
    return ChatMessage(role, content, tool_calls=calls)


def content_text(content: Any) -> str:
    """`content` is a string, null, or a list of parts ({"type": "text", "text": …})."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")


def from_openai_messages(messages: list[dict[str, Any]]) -> list[ChatMessage]:
    """A whole chat-completions conversation → engine messages, tool results named after their call."""
    names: dict[str, str] = {}
    out = []
    for raw in messages:
        message = from_openai_message(raw)
        names.update((c.id, c.name) for c in message.tool_calls)
        if message.role == "tool" and message.tool_call_id in names:
            message = ChatMessage("tool", message.content, tool_call_id=message.tool_call_id, name=names[message.tool_call_id])
        out.append(message)
    return out

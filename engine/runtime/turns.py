"""Conversations: a transcript in the OpenAI chat format, its consistency, trimming to a token
budget, and one turn of a session.

The OpenAI chat format is the one shape a transcript takes outside the engine (AgentResult's
`to_dict`, POST /v1/agent's `messages`, the session rows): role `user`/`assistant`/`tool`/
`system`, assistant `tool_calls` with `id` and `function {name, arguments}`, tool messages
with `tool_call_id`. The engine's ChatMessage maps onto it one to one (providers/chat_format.py).

A session turn (`session_turn`) takes the session for its run (the store says `session_busy`
when another turn holds it), sends the stored history with the new messages, and writes the
turn (the new messages, the tool calls, what the model read of each result, the answer) in
one go at its end, redacted as the run's events are. A cancelled or crashed turn writes
nothing: the session stays at its last complete turn.
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any, Awaitable, Callable, Protocol, Sequence

from ..providers.base import ChatMessage, ToolCall
from ..providers.chat_format import from_openai_messages, to_openai_messages
from ..safety.redaction import Redactor

CHARS_PER_TOKEN = 4
UNFINISHED = frozenset({"cancelled", "error"})  # a turn that stopped so is not kept: the user sends it again  # the estimate of a message's tokens when nothing better is known


class SessionBook(Protocol):
    """Where sessions are kept (the run store's `Sessions`, store/sessions.py)."""

    def begin(self, session_id: str, run_id: str, *, owner: str | None = None,
              hold_s: float = 3600.0) -> list[dict[str, Any]]: ...

    def append(self, session_id: str, run_id: str, messages: list[dict[str, Any]], usage: dict[str, Any]) -> bool: ...

    def release(self, session_id: str, run_id: str) -> None: ...


def chat_format(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Engine messages → the OpenAI chat format (tool messages keep the tool's `name`)."""
    out = to_openai_messages(tuple(messages))
    for message, wire in zip(messages, out, strict=True):  # one wire message per message
        if message.role == "tool" and message.name:
            wire["name"] = message.name
    return out


def parse_messages(messages: str | Sequence[Any]) -> list[ChatMessage]:
    """A prompt string, or a list of ChatMessage / OpenAI chat-format dicts, checked for
    consistency (ValueError naming the index of the first message that is not right)."""
    if isinstance(messages, str):
        return [ChatMessage("user", messages)]
    out: list[ChatMessage] = []
    names: dict[str, str] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, ChatMessage):
            problem = _shape_problem(message)
            if problem:
                raise ValueError(f"messages[{index}] {problem}")
            [message] = from_openai_messages([message])
        if message.role == "tool" and not message.name and message.tool_call_id in names:
            message = ChatMessage("tool", message.content, tool_call_id=message.tool_call_id, name=names[message.tool_call_id])
        names.update((c.id, c.name) for c in message.tool_calls)
        out.append(message)
    check_consistent(out)
    return out


def _shape_problem(message: Any) -> str | None:
    if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant", "tool"):
        return "must be a ChatMessage or {'role': 'system'|'user'|'assistant'|'tool', 'content': str}"
    content = message.get("content")
    if not (content is None or isinstance(content, (str, list))):
        return "has a content that is neither a string, null nor a list of parts"
    if message["role"] == "tool" and not isinstance(message.get("tool_call_id"), str):
        return "is a tool message without its tool_call_id"
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str) or not isinstance(function.get("name"), str):
            return "has a tool call without its id and function {name, arguments}"
    return None


def check_consistent(messages: Sequence[ChatMessage]) -> None:
    """Every tool message answers a call of the assistant message before it, once; every call
    is answered before the conversation goes on (what both providers' APIs require)."""
    open_calls: dict[str, int] = {}  # call id → index of the assistant message that made it
    for index, message in enumerate(messages):
        if message.role == "tool":
            if message.tool_call_id not in open_calls:
                raise ValueError(f"messages[{index}]: the tool message answers {message.tool_call_id!r}, which no "
                                 "assistant tool call before it asked (or another tool message already answered)")
            del open_calls[message.tool_call_id]
            continue
        if open_calls:
            call_id, at = next(iter(open_calls.items()))
            raise ValueError(f"messages[{index}]: the tool call {call_id!r} of messages[{at}] has no tool message "
                             "answering it before this one")
        open_calls = {call.id: index for call in message.tool_calls}
    if open_calls:
        call_id, at = next(iter(open_calls.items()))
        raise ValueError(f"messages[{at}]: its tool call {call_id!r} has no tool message answering it")


def estimated_tokens(message: ChatMessage) -> int:
    """A message's tokens, estimated from its characters (about four to a token)."""
    chars = len(message.content) + sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
    return chars // CHARS_PER_TOKEN + 4


def trim_history(messages: list[ChatMessage], max_tokens: int | None) -> tuple[list[ChatMessage], int, int]:
    """`messages` without their oldest whole turns while they would pass `max_tokens`:
    (kept, turns dropped, tokens dropped). A turn starts at a user message, so a tool call
    never leaves without its result; system messages and the last turn (the new prompt) stay."""
    if max_tokens is None:
        return messages, 0, 0
    sizes = [estimated_tokens(m) for m in messages]
    total = sum(sizes)
    if total <= max_tokens:
        return messages, 0, 0
    starts = [i for i, m in enumerate(messages) if m.role == "user"]
    turns = list(pairwise(starts))  # every turn but the last
    dropped: set[int] = set()
    dropped_turns = dropped_tokens = 0
    for start, end in turns:
        if total - dropped_tokens <= max_tokens:
            break
        span = [i for i in range(start, end) if messages[i].role != "system"]
        dropped.update(span)
        dropped_tokens += sum(sizes[i] for i in span)
        dropped_turns += 1
    kept = [m for i, m in enumerate(messages) if i not in dropped]
    return kept, dropped_turns, dropped_tokens


def redacted_turn(messages: Sequence[ChatMessage], redactor: Redactor) -> list[dict[str, Any]]:
    """A turn as the session keeps it: the chat format, redacted as the run's events are (values
    under sensitive keys of tool-call arguments, and every secret known, wherever it shows up)."""
    scrub = redactor.for_run()
    parsed = [[_parsed(c) for c in m.tool_calls] for m in messages]
    scrub(parsed)  # learn the secrets first: a prompt may quote one that a later call's arguments name
    redacted_args = scrub(parsed)
    out = []
    for message, args, wire in zip(messages, redacted_args, chat_format(messages), strict=True):  # one each per message
        wire["content"] = scrub(wire["content"]) if isinstance(wire.get("content"), str) else wire.get("content")
        # strict=False: only an assistant's calls go on the wire (another role's are dropped there: nothing to redact)
        for call, arguments, raw in zip(wire.get("tool_calls") or (), args, message.tool_calls, strict=False):
            call["function"]["arguments"] = (json.dumps(arguments, ensure_ascii=False) if arguments is not _UNPARSED
                                             else scrub(raw.arguments))
        out.append(wire)
    return out


_UNPARSED = object()


def _parsed(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments)
    except (json.JSONDecodeError, TypeError):
        return _UNPARSED


async def session_turn(run: Callable[[list[ChatMessage]], Awaitable[Any]], book: SessionBook, redactor: Redactor,
                       session_id: str, messages: str | Sequence[Any], run_id: str, owner: str | None) -> Any:
    """One turn of session `session_id`: its history and `messages` go to `run`; the turn is
    written when the run stops (not when it is cancelled, crashes, or the model failed: the
    session stays at its last complete turn)."""
    new = parse_messages(messages)
    history = parse_messages(book.begin(session_id, run_id, owner=owner))
    sent = history + new
    try:
        result = await run(sent)
    except BaseException:
        book.release(session_id, run_id)
        raise
    result.session_id = session_id
    if result.stop_reason in UNFINISHED:
        book.release(session_id, run_id)
        return result
    produced = result.messages[len(sent):] if result.messages[: len(sent)] == sent else []
    if not book.append(session_id, run_id, redacted_turn(new + list(produced), redactor), result.usage.as_dict()):
        from ..logging import logger

        logger.warning("a session turn was not written: its hold on the session expired", session=session_id, run_id=run_id)
    return result


__all__ = ["SessionBook", "chat_format", "check_consistent", "parse_messages", "session_turn", "trim_history"]

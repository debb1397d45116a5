"""`skillyard sessions [show NAME | delete NAME]`: the conversations kept in the run store
(`skillyard chat --session NAME` continues one)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .common import emit_json

if TYPE_CHECKING:
    from ..store import Store
from .runs import store_command

FOLD = 100  # characters of a tool call or result shown on its one line


def add_sessions_parser(commands: Any) -> None:
    sessions = commands.add_parser("sessions", help="conversations kept by `chat --session`; show or delete one")
    sessions.add_argument("--dir", default=".", help="project directory")
    sessions.add_argument("--json", action="store_true", help="print JSON")
    sessions.set_defaults(handler=run_sessions, action=None)
    sub = sessions.add_subparsers(dest="action", metavar="ACTION")
    show = sub.add_parser("show", help="print a conversation (tool calls and results folded to one line each)")
    show.add_argument("name")
    show.add_argument("--owner", help="the API key name whose session it is (default: the project's own, `chat --session`)")
    show.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the session as JSON (messages in the OpenAI chat format)")
    delete = sub.add_parser("delete", help="delete a conversation")
    delete.add_argument("name")
    delete.add_argument("--owner", help="the API key name whose session it is (default: the project's own)")


@store_command
def run_sessions(ns: argparse.Namespace, store: Store) -> int:
    if ns.action == "delete":
        if not store.sessions.delete(ns.name, owner=ns.owner):
            raise UsageError(f"no session {ns.name!r}; see `skillyard sessions`")
        print(f"deleted session {ns.name}")
        return 0
    if ns.action == "show":
        session = store.sessions.get(ns.name, owner=ns.owner)
        if session is None:
            raise UsageError(f"no session {ns.name!r}; see `skillyard sessions`")
        if ns.json:
            emit_json(session, pretty=True)
        else:
            for line in conversation_lines(session["messages"]):
                print(line)
        return 0
    sessions = store.sessions.list()
    if ns.json:
        emit_json(sessions, pretty=True)
        return 0
    if not sessions:
        print("no sessions yet; `skillyard chat --session NAME PROMPT` starts one", file=sys.stderr)
        return 0
    owned = any(s["principal"] for s in sessions)  # a name is its owner's: HTTP callers' sessions show whose
    owner_head = f"{'OWNER':<12} " if owned else ""
    print(f"{'NAME':<24} {owner_head}{'TURNS':>5}  {'LAST USED':<19}  TOKENS (in/out)")
    for s in sessions:
        usage, owner = s["usage"], (f"{s['principal'] or '-':<12} " if owned else "")
        print(f"{s['id']:<24} {owner}{s['turns']:>5}  {_when(s['updated_at'])}  {usage['input_tokens']}/{usage['output_tokens']}")
    return 0


def conversation_lines(messages: list[dict[str, Any]]) -> list[str]:
    """A conversation as text: user and assistant text whole, tool calls and results one line each."""
    lines: list[str] = []
    for message in messages:
        role, content = message["role"], message.get("content")
        text = content if isinstance(content, str) else ""
        if role == "tool":
            lines.append(f"  ← {message.get('name') or message.get('tool_call_id')}: {_fold(text)}")
            continue
        if text.strip():
            lines.append(f"{role}: {text}")
        for call in message.get("tool_calls") or ():
            function = call["function"]
            lines.append(f"  → {function['name']}({_fold(function.get('arguments') or '')})")
    return lines


def _fold(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= FOLD else line[: FOLD - 1] + "…"


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


__all__ = ["add_sessions_parser", "conversation_lines", "run_sessions"]

"""Sessions in the run store: named conversations, their messages, and who holds a turn.

A part of `Store` (base.py), beside batches: plain SQL both SQLite and PostgreSQL read, through
the database's `transaction` / `fetch`, outside the event writer (a turn writes its messages
once, at its end, in one transaction: a turn cut by a crash leaves the session at its last
complete turn).

Two turns of one session never interleave: `begin` takes the session for a run (`busy_run`,
until `busy_until`) with one conditional UPDATE, which the database serialises across
processes and replicas; a second turn meanwhile gets `session_busy`. `append` writes the
turn's messages only while its run still holds the session, and lets it go. A holder that
died without letting go loses the session when its hold expires.

The messages arrive redacted (runtime/turns.py): this file stores what it is given.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..errors import SessionError
from .database import Database, Statement

# A session is named within its owner's sessions (key (principal, id)); the project's own use
# (the CLI, Python) is the owner '' in the row and None everywhere else. A run holds at most one
# session: the turn's writes find it by its id and `busy_run`.
PROJECT = ""
_TAKE = ("UPDATE sessions SET busy_run = ?, busy_until = ? WHERE principal = ? AND id = ? "
         "AND (busy_run IS NULL OR busy_run = ? OR busy_until < ?)")
_CREATE = ("INSERT INTO sessions (principal, id, created_at, updated_at, turns, input_tokens, output_tokens) "
           "VALUES (?, ?, ?, ?, 0, 0, 0) ON CONFLICT (principal, id) DO NOTHING")
_ROW = "SELECT id, principal, created_at, updated_at, turns, input_tokens, output_tokens, busy_run, busy_until FROM sessions"
_HELD = "s.id = ? AND s.busy_run = ?"
_ADD_MESSAGE = (
    "INSERT INTO session_messages (principal, session_id, seq, turn, run_id, message) "
    "SELECT s.principal, s.id, (SELECT COALESCE(MAX(m.seq), 0) FROM session_messages AS m "
    "WHERE m.principal = s.principal AND m.session_id = s.id) + 1, s.turns + 1, ?, ? "
    f"FROM sessions AS s WHERE {_HELD}"
)
_END_TURN = ("UPDATE sessions SET turns = turns + 1, updated_at = ?, input_tokens = input_tokens + ?, "
             "output_tokens = output_tokens + ?, busy_run = NULL, busy_until = NULL WHERE id = ? AND busy_run = ?")


class Sessions:
    """Sessions, read and written. `owner`: whose session a name is (the API key name; None: the
    project's own use). `visible` in `list`: the owner whose sessions a caller may see (None:
    all, for admins and the project), as runs are seen (server/routes/runs.py)."""

    def __init__(self, database: Database) -> None:
        self._transaction = database.transaction
        self._fetch = database.fetch

    def begin(self, session_id: str, run_id: str, *, owner: str | None = None,
              hold_s: float = 3600.0) -> list[dict[str, Any]]:
        """Take `owner`'s session `session_id` for the turn of `run_id` (creating it on first use)
        and return its messages so far. SessionError `session_busy` when another turn holds it.
        Taking it again for the same run is a no-op."""
        now, key = _now_ms(), _key(owner)
        _created, taken = self._transaction([
            (_CREATE, (key, session_id, now, now)),
            (_TAKE, (run_id, now + int(hold_s * 1000), key, session_id, run_id, now)),
        ])
        if not taken:
            row = self._row(session_id, owner)
            holder = row["busy_run"] if row is not None else None
            raise SessionError("session_busy", session_id, f"session {session_id!r} is busy: another turn of it "
                               f"(run {holder}) is running; send this turn when that one ends")
        return self.messages(session_id, owner=owner)

    def append(self, session_id: str, run_id: str, messages: list[dict[str, Any]], usage: dict[str, Any]) -> bool:
        """Write one whole turn and let the session go, in one transaction; False (nothing
        written) when the run no longer holds the session (its hold expired and another took it)."""
        statements: list[Statement] = [(_ADD_MESSAGE, (run_id, json.dumps(m, ensure_ascii=False), session_id, run_id))
                                       for m in messages]
        statements.append((_END_TURN, (_now_ms(), int(usage.get("input_tokens") or 0),
                                       int(usage.get("output_tokens") or 0), session_id, run_id)))
        return self._transaction(statements)[-1] == 1

    def release(self, session_id: str, run_id: str) -> None:
        """Let the session go without a turn (the turn was cut: the session stays as it was)."""
        self._transaction([("UPDATE sessions SET busy_run = NULL, busy_until = NULL WHERE id = ? AND busy_run = ?",
                            (session_id, run_id))])

    def messages(self, session_id: str, *, owner: str | None = None) -> list[dict[str, Any]]:
        rows = self._fetch("SELECT message FROM session_messages WHERE principal = ? AND session_id = ? ORDER BY seq",
                           (_key(owner), session_id))
        return [json.loads(row[0]) for row in rows]

    def list(self, *, visible: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Sessions, the most recently used first."""
        where, params = (" WHERE principal = ?", [_key(visible)]) if visible is not None else ("", [])
        rows = self._fetch(f"{_ROW}{where} ORDER BY updated_at DESC, principal, id LIMIT ?", (*params, limit))
        return [_summary(row) for row in rows]

    def get(self, session_id: str, *, owner: str | None = None) -> dict[str, Any] | None:
        """`owner`'s session with its `messages` and `runs` (one per turn, in order), or None."""
        row = self._row(session_id, owner)
        if row is None:
            return None
        runs = self._fetch("SELECT run_id, MIN(seq) AS first FROM session_messages WHERE principal = ? AND session_id = ? "
                           "GROUP BY run_id ORDER BY first", (_key(owner), session_id))
        return {**row, "messages": self.messages(session_id, owner=owner), "runs": [r[0] for r in runs]}

    def delete(self, session_id: str, *, owner: str | None = None) -> bool:
        key = _key(owner)
        counts = self._transaction([("DELETE FROM session_messages WHERE principal = ? AND session_id = ?", (key, session_id)),
                                    ("DELETE FROM sessions WHERE principal = ? AND id = ?", (key, session_id))])
        return counts[-1] == 1

    def _row(self, session_id: str, owner: str | None) -> dict[str, Any] | None:
        rows = self._fetch(f"{_ROW} WHERE principal = ? AND id = ?", (_key(owner), session_id))
        return _summary(rows[0]) if rows else None


def _key(owner: str | None) -> str:
    return PROJECT if owner is None else owner


def _summary(row: tuple[Any, ...]) -> dict[str, Any]:
    sid, principal, created, updated, turns, input_tokens, output_tokens, busy_run, busy_until = row
    busy = busy_run is not None and busy_until is not None and busy_until >= _now_ms()
    return {"id": sid, "principal": principal or None, "created_at": created, "updated_at": updated, "turns": int(turns),
            "usage": {"input_tokens": int(input_tokens), "output_tokens": int(output_tokens)},
            "busy": busy, "busy_run": busy_run if busy else None}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000

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
from .database import Database

_TAKE = ("UPDATE sessions SET busy_run = ?, busy_until = ? WHERE id = ? "
         "AND (busy_run IS NULL OR busy_run = ? OR busy_until < ?)")
_ROW = "SELECT id, principal, created_at, updated_at, turns, input_tokens, output_tokens, busy_run, busy_until FROM sessions"
_ADD_MESSAGE = (
    "INSERT INTO session_messages (session_id, seq, turn, run_id, message) "
    "SELECT ?, (SELECT COALESCE(MAX(seq), 0) FROM session_messages WHERE session_id = ?) + 1, turns + 1, ?, ? "
    "FROM sessions WHERE id = ? AND busy_run = ?"
)
_END_TURN = ("UPDATE sessions SET turns = turns + 1, updated_at = ?, input_tokens = input_tokens + ?, "
             "output_tokens = output_tokens + ?, busy_run = NULL, busy_until = NULL WHERE id = ? AND busy_run = ?")


class Sessions:
    """Sessions, read and written. `visible`: the principal whose sessions a caller may see
    (None: all, the project's own use and admins), as runs are seen (server/routes/runs.py)."""

    def __init__(self, database: Database) -> None:
        self._transaction = database.transaction
        self._fetch = database.fetch

    def begin(self, session_id: str, run_id: str, *, owner: str | None = None, visible: str | None = None,
              hold_s: float = 3600.0) -> list[dict[str, Any]]:
        """Take `session_id` for the turn of `run_id` (creating the session on first use) and
        return its messages so far. SessionError `session_busy` when another turn holds it,
        `unknown_session` when it is another caller's. Taking it again for the same run is a no-op."""
        now = _now_ms()
        created, taken = self._transaction([
            ("INSERT INTO sessions (id, principal, created_at, updated_at, turns, input_tokens, output_tokens) "
             "VALUES (?, ?, ?, ?, 0, 0, 0) ON CONFLICT (id) DO NOTHING", (session_id, owner, now, now)),
            (_TAKE, (run_id, now + int(hold_s * 1000), session_id, run_id, now)),
        ])
        row = self._row(session_id)
        if row is None or (visible is not None and row["principal"] != visible):
            if taken and row is not None:
                self.release(session_id, run_id)
            raise SessionError("unknown_session", session_id, f"no session {session_id!r}")
        if not taken:
            raise SessionError("session_busy", session_id, f"session {session_id!r} is busy: another turn of it "
                               f"(run {row['busy_run']}) is running; send this turn when that one ends")
        return self.messages(session_id)

    def append(self, session_id: str, run_id: str, messages: list[dict[str, Any]], usage: dict[str, Any]) -> bool:
        """Write one whole turn and let the session go, in one transaction; False (nothing
        written) when the run no longer holds the session (its hold expired and another took it)."""
        statements = [
            (_ADD_MESSAGE, (session_id, session_id, run_id, json.dumps(m, ensure_ascii=False), session_id, run_id))
            for m in messages
        ]
        statements.append((_END_TURN, (_now_ms(), int(usage.get("input_tokens") or 0),
                                       int(usage.get("output_tokens") or 0), session_id, run_id)))
        return self._transaction(statements)[-1] == 1

    def release(self, session_id: str, run_id: str) -> None:
        """Let the session go without a turn (the turn was cut: the session stays as it was)."""
        self._transaction([("UPDATE sessions SET busy_run = NULL, busy_until = NULL WHERE id = ? AND busy_run = ?",
                            (session_id, run_id))])

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._fetch("SELECT message FROM session_messages WHERE session_id = ? ORDER BY seq", (session_id,))
        return [json.loads(row[0]) for row in rows]

    def list(self, *, visible: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """Sessions, the most recently used first."""
        where, params = (" WHERE principal = ?", [visible]) if visible is not None else ("", [])
        rows = self._fetch(f"{_ROW}{where} ORDER BY updated_at DESC, id LIMIT ?", (*params, limit))
        return [_summary(row) for row in rows]

    def get(self, session_id: str, *, visible: str | None = None) -> dict[str, Any] | None:
        """A session with its `messages` and `runs` (one per turn, in order), or None."""
        row = self._row(session_id)
        if row is None or (visible is not None and row["principal"] != visible):
            return None
        runs = self._fetch("SELECT run_id, MIN(seq) AS first FROM session_messages WHERE session_id = ? "
                           "GROUP BY run_id ORDER BY first", (session_id,))
        return {**row, "messages": self.messages(session_id), "runs": [r[0] for r in runs]}

    def delete(self, session_id: str, *, visible: str | None = None) -> bool:
        if self.get(session_id, visible=visible) is None:
            return False
        self._transaction([("DELETE FROM session_messages WHERE session_id = ?", (session_id,)),
                           ("DELETE FROM sessions WHERE id = ?", (session_id,))])
        return True

    def _row(self, session_id: str) -> dict[str, Any] | None:
        rows = self._fetch(f"{_ROW} WHERE id = ?", (session_id,))
        return _summary(rows[0]) if rows else None


def _summary(row: tuple[Any, ...]) -> dict[str, Any]:
    sid, principal, created, updated, turns, input_tokens, output_tokens, busy_run, busy_until = row
    busy = busy_run is not None and busy_until is not None and busy_until >= _now_ms()
    return {"id": sid, "principal": principal, "created_at": created, "updated_at": updated, "turns": int(turns),
            "usage": {"input_tokens": int(input_tokens), "output_tokens": int(output_tokens)},
            "busy": busy, "busy_run": busy_run if busy else None}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000

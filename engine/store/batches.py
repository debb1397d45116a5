"""Batches in the run store: which runs a `skillyard batch` made, and how its cases went.

A part of `Store` (base.py): the statements are plain SQL both SQLite and PostgreSQL read;
they go through the database's `transaction` / `fetch`, outside the event writer (a batch
writes a row per finished case, far fewer than events).
"""

from __future__ import annotations

import json
import time
from typing import Any

from .database import Database

_UPSERT_CASE = (
    "INSERT INTO batch_cases (batch_id, case_id, run_id, ok, passed, verdicts) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (batch_id, case_id) DO UPDATE SET run_id = excluded.run_id, ok = excluded.ok, passed = excluded.passed, "
    "verdicts = excluded.verdicts"
)
CaseRow = tuple[str, str, bool, bool, list[dict[str, Any]]]  # case id, run id, ok, passed, verdicts (redacted)
_SUMMARY = (
    "SELECT b.id, b.tool, b.principal, b.status, b.started_at, b.finished_at, b.total, b.data_file, "
    "COUNT(c.case_id), COALESCE(SUM(c.ok), 0), COALESCE(SUM(c.passed), 0) "
    "FROM batches b LEFT JOIN batch_cases c ON c.batch_id = b.id"
)
_GROUP = " GROUP BY b.id, b.tool, b.principal, b.status, b.started_at, b.finished_at, b.total, b.data_file"


class Batches:
    """Batches and their cases, written and read."""

    def __init__(self, database: Database) -> None:
        self._transaction = database.transaction
        self._fetch = database.fetch

    def start_batch(self, batch_id: str, tool: str, total: int, *, principal: str | None = None,
                    data_file: str | None = None) -> None:
        """Record a batch as running (again, when it resumes)."""
        self._transaction([(
            "INSERT INTO batches (id, tool, principal, status, started_at, total, data_file) VALUES (?, ?, ?, 'running', ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET status = 'running', finished_at = NULL, total = excluded.total",
            (batch_id, tool, principal, _now_ms(), total, data_file),
        )])

    def record_batch_cases(self, batch_id: str, cases: list[CaseRow]) -> None:
        """Finished cases, in one transaction. The verdicts arrive redacted (they may quote the output)."""
        if cases:
            self._transaction([
                (_UPSERT_CASE, (batch_id, case, run, int(ok), int(passed), json.dumps(verdicts, ensure_ascii=False, default=str)))
                for case, run, ok, passed, verdicts in cases
            ])

    def finish_batch(self, batch_id: str, status: str) -> None:
        """`done` or `interrupted`."""
        self._transaction([("UPDATE batches SET status = ?, finished_at = ? WHERE id = ?", (status, _now_ms(), batch_id))])

    def batches(self, *, limit: int = 20, principal: str | None = None) -> list[dict[str, Any]]:
        """Recent batches, newest first, with their counts; `principal`: only that key name's."""
        where, params = ("WHERE b.principal = ?", [principal]) if principal is not None else ("", [])
        rows = self._fetch(f"{_SUMMARY} {where}{_GROUP} ORDER BY b.started_at DESC, b.id DESC LIMIT ?", (*params, limit))
        return [_batch(row) for row in rows]

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        """One batch with its cases (id, run_id, ok, passed, expect) in case id order, or None."""
        rows = self._fetch(f"{_SUMMARY} WHERE b.id = ?{_GROUP}", (batch_id,))
        if not rows:
            return None
        cases = self._fetch("SELECT case_id, run_id, ok, passed, verdicts FROM batch_cases WHERE batch_id = ? ORDER BY case_id",
                            (batch_id,))
        return {**_batch(rows[0]), "cases": [_case(*row) for row in cases]}

    def batch_run_ids(self, batch_id: str) -> list[str]:
        return [row[0] for row in self._fetch("SELECT run_id FROM batch_cases WHERE batch_id = ?", (batch_id,))]


def _batch(row: tuple[Any, ...]) -> dict[str, Any]:
    batch_id, tool, principal, status, started, finished, total, data_file, ran, ok, passed = row
    return {"id": batch_id, "tool": tool, "principal": principal, "status": status, "started_at": started,
            "finished_at": finished, "total": total, "data_file": data_file, "ran": int(ran), "ok": int(ok),
            "passed": int(passed), "pass_rate": round(int(passed) / int(ran), 4) if ran else None}


def _case(case_id: str, run_id: str, ok: Any, passed: Any, verdicts: str | None) -> dict[str, Any]:
    """A case as the API shows it; `expect` is None for cases recorded before verdicts were kept."""
    return {"id": case_id, "run_id": run_id, "ok": bool(ok), "passed": bool(passed),
            "expect": json.loads(verdicts) if verdicts else None}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000

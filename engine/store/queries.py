"""Reading the store: runs, their events, tool logs, model exchanges, approvals; and pruning.

Plain SQL both dialects read, through `Database.fetch` / `transaction` (the few pieces where
they differ are the Database's: `NEWEST`, `PREFIX`, `run_tables`, and `events`, which SQLite
reads from a run's packed events too). Never the writer's connection: a read does not wait
for the writer, nor the writer for it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable

from .database import Database, Statement
from .errors import StoreError

COUNT_MATCHES = 1_000  # an ambiguous run id prefix's matches are counted up to this many
_RUN_SELECT = (  # a run and who started it (run_owners: only runs started by a service's caller have one)
    "SELECT r.id, r.kind, r.name, r.status, r.started_at, r.finished_at, r.input, r.output, r.error, r.usage, "
    "r.parent_run_id, o.principal FROM runs AS r LEFT JOIN run_owners AS o ON o.run_id = r.id"
)


class AmbiguousRunId(StoreError):
    """A run id prefix that matches several runs. Its text names a few of them, for the local
    user of the store (`skillyard runs show`); `count` alone is for the service's callers."""

    def __init__(self, prefix: str, shown: list[str], count: int):
        self.prefix, self.count = prefix, count
        self.counted = f"{count:,}" + (" or more" if count >= COUNT_MATCHES else "")
        listed = ", ".join(shown) + (", …" if count > len(shown) else "")
        super().__init__(f"run id prefix {prefix!r} matches several runs ({self.counted}: {listed}); give more of the id")


@dataclass(frozen=True)
class RunRecord:
    id: str
    kind: str
    name: str
    status: str
    started_at: int
    finished_at: int | None
    input: Any
    output: Any
    error: Any
    usage: Any
    parent_run_id: str | None
    principal: str | None = None  # the API key name that started it through the service

    @property
    def duration_ms(self) -> int | None:
        return None if self.finished_at is None else self.finished_at - self.started_at

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "duration_ms": self.duration_ms}


class Queries:
    """The store's reads (and prune), over its database."""

    def __init__(self, database: Database) -> None:
        self._database = database

    def runs(self, *, tool: str | None = None, status: str | None = None, since_ms: int | None = None, limit: int = 20,
             principal: str | None = None, batch: str | None = None) -> list[RunRecord]:
        """Recent runs, newest first. `since_ms` is an absolute time in ms since the epoch;
        `principal`: only the runs started by that API key name; `batch`: only that batch's cases."""
        where, params = _where({"r.name = ?": tool, "r.status = ?": status, "r.started_at >= ?": since_ms,
                                "o.principal = ?": principal,
                                "r.id IN (SELECT run_id FROM batch_cases WHERE batch_id = ?)": batch})
        rows = self._database.fetch(f"{_RUN_SELECT} WHERE {where} ORDER BY {self._database.NEWEST} LIMIT ?", (*params, limit))
        return [_run(row) for row in rows]

    def run(self, run_id: str, *, principal: str | None = None) -> RunRecord | None:
        """One run by id, or by a prefix of its id that matches one run only. `principal`:
        among the runs started by that API key name only (a caller's view: another's run,
        by id or prefix, is not there); None: among every run.

        None if nothing matches; AmbiguousRunId if the prefix matches several runs.
        """
        if not run_id:
            return None
        fetch = self._database.fetch
        owner = "" if principal is None else " AND o.principal = ?"
        mine: tuple[str, ...] = () if principal is None else (principal,)
        rows = fetch(f"{_RUN_SELECT} WHERE r.id = ?{owner}", (run_id, *mine))
        if not rows:  # a prefix: a range on the primary key (no LIKE: `_` is a wildcard there)
            where, params = f"{self._database.PREFIX}{owner}", (run_id, run_id + "\U0010ffff", *mine)
            rows = fetch(f"{_RUN_SELECT} WHERE {where} ORDER BY r.id LIMIT 6", params)
            if len(rows) > 1:
                counted = f"SELECT COUNT(*) FROM ({_RUN_SELECT} WHERE {where} LIMIT {COUNT_MATCHES}) AS matches"
                raise AmbiguousRunId(run_id, [r[0] for r in rows[:5]], fetch(counted, params)[0][0])
        return _run(rows[0]) if rows else None

    def events(self, run_id: str, *, after_seq: int = 0) -> list[dict[str, Any]]:
        """A run's events in `seq` order, as `Event.to_dict()` gives them (redacted)."""
        return self._database.events(run_id, after_seq)

    def model_exchanges(self, run_id: str) -> list[dict[str, Any]]:
        """The prompts and answers of a run's model calls, in order (what replay answers from)."""
        rows = self._database.fetch(
            "SELECT seq, tool_call_id, step_id, skill, model, attempt, messages, response FROM model_exchanges WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        return [
            {"seq": seq, "tool_call_id": call, "step_id": step, "skill": skill, "model": model, "attempt": attempt,
             "messages": json.loads(messages), "response": response}
            for seq, call, step, skill, model, attempt, messages, response in rows
        ]

    def tool_logs(self, *, tool: str | None = None, status: str | None = None, run_id: str | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        """Tool execution logs, newest first (status success | error | timeout)."""
        where, params = _where({"tool = ?": tool, "status = ?": status, "run_id = ?": run_id})
        rows = self._database.fetch(
            f"SELECT id, run_id, tool_call_id, tool, input, output, status, error_message, duration_ms, created_at "
            f"FROM tool_logs WHERE {where} ORDER BY id DESC LIMIT ?",
            (*params, limit),
        )
        keys = ("id", "run_id", "tool_call_id", "tool", "input", "output", "status", "error_message", "duration_ms", "created_at")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def pending_approvals(self, run_id: str) -> list[str]:
        """The tool calls of `run_id` waiting for an answer, as recorded by `Store.set_approval`."""
        rows = self._database.fetch(
            "SELECT tool_call_id FROM approvals WHERE run_id = ? AND status = 'pending' ORDER BY tool_call_id", (run_id,))
        return [row[0] for row in rows]

    def executor(self, run_id: str) -> str | None:
        """Where `run_id` executes when not in the process that wrote its row (`temporal`), else None."""
        rows = self._database.fetch("SELECT executor FROM run_executors WHERE run_id = ?", (run_id,))
        return rows[0][0] if rows else None

    def prune(self, older_than_ms: int) -> int:
        """Delete runs (and their events, logs, exchanges… `Database.run_tables`) that started
        before now − older_than_ms, in one transaction. Runs still `running` are kept. Returns
        how many runs were deleted."""
        cutoff = int(time.time() * 1000) - older_than_ms
        old = "SELECT id FROM runs WHERE started_at < ? AND status != 'running'"
        statements: list[Statement] = [(f"DELETE FROM {table} WHERE run_id IN ({old})", (cutoff,))
                                       for table in self._database.run_tables]
        return self._database.transaction([*statements, (f"DELETE FROM runs WHERE id IN ({old})", (cutoff,))])[-1]


def _where(conditions: dict[str, Any]) -> tuple[str, list[Any]]:
    """`{"name = ?": value}` → an SQL condition and its parameters; empty values (None, "") are skipped."""
    used = [(clause, value) for clause, value in conditions.items() if value is not None and value != ""]
    return " AND ".join(clause for clause, _ in used) or "1=1", [value for _, value in used]


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _run(row: Iterable[Any]) -> RunRecord:
    rid, kind, name, status, started, finished, input, output, error, usage, parent, principal = row
    return RunRecord(rid, kind, name, status, started, finished, _loads(input), _loads(output), _loads(error), _loads(usage),
                     parent, principal)

"""A batch in the run store: its row, and the run of each case, written as cases finish.

Cases are written in groups (every 50 finished cases, and at the end) so that a batch of
thousands costs a few transactions; the results file stays the record of each case's output.
"""

from __future__ import annotations

from typing import Any

from ..runtime.ids import new_id
from ..store import Store
from ..store.batches import CaseRow

FLUSH_EVERY = 50


class BatchRecording:
    def __init__(self, store: Store | None, tool: str, total: int, data_file: str, batch_id: str | None = None):
        self.store = store
        self.batch_id = batch_id or new_id("batch")
        self.pending: list[CaseRow] = []
        if store is not None:
            store.start_batch(self.batch_id, tool, total, data_file=data_file)

    def add(self, record: dict[str, Any]) -> None:
        record["batch_id"] = self.batch_id
        if self.store is None:
            return
        # a verdict may quote the output ("got …"): redacted with the values the case's data hides
        verdicts = self.store.redactor.for_run()({"data": record.get("data"), "expect": record.get("expect") or []})["expect"]
        self.pending.append((record["id"], record["run_id"], bool(record["ok"]), bool(record.get("passed", True)), verdicts))
        if len(self.pending) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if self.store is not None and self.pending:
            self.store.record_batch_cases(self.batch_id, self.pending)
            self.pending = []

    def finish(self, status: str) -> None:
        """`done` or `interrupted`: the cases not yet written, then the batch's end."""
        if self.store is not None:
            self.flush()
            self.store.finish_batch(self.batch_id, status)

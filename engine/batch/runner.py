"""Run the cases of a batch through the engine, N at a time, into a results file.

Each finished case is one line of the results file, written and flushed as it finishes, so an
interrupted batch leaves a valid file that `--resume` completes. Cases go through
`Engine.call_tool` like any other call: the router's checks, events, the run store, the
backend (local or Temporal) all apply.

With traces on, each case is a trace of its own: a root span `case <id>` (`skillyard.batch_id`,
`skillyard.case`) over the tool call and its judges. Not one trace for the whole batch: a batch
of thousands of cases would be a trace of tens of thousands of spans, past what trace stores
keep in one trace and what their viewers draw, and a sampler would keep or drop it whole;
per case, each is sampled, kept and found on its own (by `skillyard.batch_id`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from .._engine import Engine
from ..errors import UsageError
from ..link.expect import Check, check_result
from ..providers.base import Usage
from ..runtime.result import ToolResult
from .dataset import Case
from .judge import Judges

CaseRecord = dict[str, Any]


@dataclass(slots=True)
class BatchCase:
    """A case with its compiled checks (the case's own, else the batch defaults)."""

    case: Case
    checks: tuple[Check, ...]


@dataclass(slots=True)
class BatchRun:
    tool: str
    cases: list[BatchCase]
    concurrency: int = 4
    model: str | None = None
    batch_id: str = ""
    records: list[CaseRecord] = field(default_factory=list)


def read_results(path: str | Path) -> list[CaseRecord]:
    """The records of a results file; a torn last line (a killed writer) is ignored."""
    records: list[CaseRecord] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return records
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the results file ({exc})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if number == len(lines):
                break
            raise UsageError(f"{path}:{number}: not a results line (JSON); was it written by `skillyard batch`?") from None
        if not isinstance(record, dict) or "id" not in record or "ok" not in record:
            raise UsageError(f"{path}:{number}: not a results line (no id/ok); was it written by `skillyard batch`?")
        records.append(record)
    return records


class ResultsFile:
    """Appends one JSON line per finished case; a line is whole or absent."""

    def __init__(self, path: str | Path | None, redact: Callable[[Any], Any]):
        self.redact = redact
        self.stream: TextIO | None = None
        if path is not None:
            try:
                self.stream = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
            except OSError as exc:
                raise UsageError(f"--out {path}: cannot write it ({exc.strerror or exc})") from None

    def write(self, record: CaseRecord) -> None:
        if self.stream is not None:
            line = json.dumps(self.redact(record), ensure_ascii=False, default=str)
            self.stream.write(line + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


async def run_batch(engine: Engine, batch: BatchRun, results: ResultsFile,
                    on_record: Callable[[CaseRecord], None]) -> list[CaseRecord]:
    """Run every case (at most `concurrency` at once); cancelling it cancels the cases in flight."""
    queue: asyncio.Queue[BatchCase] = asyncio.Queue()
    for item in batch.cases:
        queue.put_nowait(item)
    judges = Judges(engine, batch.model)

    async def worker() -> None:
        while not queue.empty():
            item = queue.get_nowait()
            record = await _run_case(engine, batch, item, judges)
            batch.records.append(record)
            on_record(record)  # first: it may add to the record (its batch id)
            results.write(record)

    workers = [asyncio.create_task(worker()) for _ in range(min(batch.concurrency, len(batch.cases)) or 1)]
    try:
        await asyncio.gather(*workers)
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return batch.records


async def _run_case(engine: Engine, batch: BatchRun, item: BatchCase, judges: Judges) -> CaseRecord:
    traces = engine.traces
    if traces is None:
        return await _judged_case(engine, batch, item, judges)
    with traces.root_span(f"case {item.case.id}", {"skillyard.batch_id": batch.batch_id, "skillyard.case": str(item.case.id),
                                                   "skillyard.tool": batch.tool}):
        return await _judged_case(engine, batch, item, judges)


async def _judged_case(engine: Engine, batch: BatchRun, item: BatchCase, judges: Judges) -> CaseRecord:
    case = item.case
    result = await engine.call_tool(batch.tool, case.arguments, model=batch.model, principal=None)
    before = Usage(judges.input_tokens, judges.output_tokens, judges.cost_usd)
    verdicts = await check_result(item.checks, result, {"id": case.id, "arguments": case.arguments}, judges)
    record = _record(case, result, verdicts)
    judged_in, judged_out = judges.input_tokens - before.input_tokens, judges.output_tokens - before.output_tokens
    if judged_in or judged_out:
        cost = None if judges.cost_usd is None else judges.cost_usd - (before.cost_usd or 0.0)
        record["judge_usage"] = Usage(judged_in, judged_out, cost).as_dict()
    return record


def _record(case: Case, result: ToolResult, verdicts: list[dict[str, Any]]) -> CaseRecord:
    metadata = result.metadata
    return {
        "id": case.id,
        "ok": result.ok,
        "data": result.data if result.ok else None,
        "error": result.error.to_dict() if result.error is not None else None,
        "expect": verdicts,
        "passed": all(v["ok"] for v in verdicts),
        "run_id": result.run_id,
        "duration_ms": metadata.get("duration_ms"),
        "usage": metadata.get("usage"),
    }

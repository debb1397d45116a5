"""What travels between the front door, the workflow and the activities: plain JSON values.

Temporal records each of them in the execution's history, so they are small, versionless
dicts and lists; names here are shared by every side (a rolling deploy keeps them stable).

An event row, as the workflow numbers it: `[seq, type, ts, tool_call_id, step_id, skill, data]`.
An event as an activity reports it (not yet numbered): `[type, ts, step_id, skill, data]`.
"""

from __future__ import annotations

from typing import Any

WORKFLOW = "skillyard.tool"  # the workflow type
STEP_ACTIVITY = "skillyard.step"  # runs one step's skill
CALL_WORKFLOW = "skillyard.tool_call"  # the workflow type of a call whose tool is not a workflow (single.py)
BODY_ACTIVITY = "skillyard.tool_body"  # runs that tool's executor once
RECORD_ACTIVITY = "skillyard.record_events"  # writes numbered events to the store, idempotently
EXECUTOR = "temporal"  # run_executors.executor of the runs on this backend (orphans.py adopts them)
REVISION_MISMATCH = "RevisionMismatch"  # the error type of a task refused for another project revision
STEP_FAILURE = "StepFailure"  # the error type of a call that failed (code, details and last seq in its details)
APPROVE_SIGNAL = "approve"  # args: tool_call_id, approve (bool); a direct call's and an agent run's confirmations
PENDING_QUERY = "pending_approvals"  # the tool_call_ids waiting for an answer
ANSWER_QUERY = "approval_answer"  # arg: tool_call_id; the answer the execution took (None: none yet)


def mismatch_message(asked: str, served: str) -> str:
    return (f"this task was started for project revision {asked}, but this worker serves revision {served}: "
            "run workers of the same project files as the front doors (restart the workers after a deploy)")


def failure_details(code: str, details: dict[str, Any] | None, last_seq: int, rows: list[list[Any]]) -> dict[str, Any]:
    """A failed call's details; `rows`: its last events, not yet written (see `ended`)."""
    return {"code": code, "details": details or {}, "last_seq": last_seq, "rows": rows}


def ended(outcome: dict[str, Any], rows: list[list[Any]]) -> dict[str, Any]:
    """A call's result with its last events (numbered rows), which no activity wrote: they travel
    with the execution's end, and the front door (or the worker that adopted the run) writes
    them with the call's last event, keyed by (run_id, seq), so a second write changes nothing.
    One activity per step and none after the last: as many activities as the steps."""
    return {**outcome, "rows": rows}

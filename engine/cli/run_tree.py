"""`skillyard runs show`: a stored run's events as a tree (tool → steps → skills).

Workflows beyond a straight line read as the live timeline does (engine/cli/timeline.py): a
skipped step says which `when` did not hold, parallel members are marked `∥`, a sub-workflow
step names its workflow, and a forEach step shows its first ITEMS_SHOWN items one by one, then
one line counting the rest ("… 990 more items: 985 ok, 5 failed") and the failed ones listed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..runs.payloads import (
    AgentDone,
    ModelCallStart,
    ModelExchange,
    SkillError,
    SkillResult,
    SkillStart,
    ToolCallError,
    ToolCallResult,
    ToolCallStart,
    ToolProgressDelta,
    Where,
)
from .error_view import last_frame_lines
from .timeline import ITEMS_SHOWN

Failure = tuple[int, str, str, str]  # (item index, step id, code, message)


def short(value: Any, width: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class _Items:
    """What a forEach step's items did, for the line that counts the ones not shown."""

    total: int
    done: set[int] = field(default_factory=set)
    failed: dict[int, Failure] = field(default_factory=dict)

    def summary(self) -> list[str]:
        hidden = self.total - ITEMS_SHOWN
        if hidden <= 0:
            return []
        failed = sorted(index for index in self.failed if index >= ITEMS_SHOWN)
        ok = len([index for index in self.done if index >= ITEMS_SHOWN and index not in self.failed])
        rest = hidden - ok - len(failed)
        counts = f"{ok} ok, {len(failed)} failed" + (f", {rest} not finished" if rest > 0 else "")
        lines = [f"  │  │    … {hidden} more item{'s' if hidden != 1 else ''}: {counts}"]
        for index in failed:
            _, step_id, code, message = self.failed[index]
            lines.append(f"  │  │      ✗ #{index} {step_id}: {code}: {short(message, 110)}")
        return lines


class RunTree:
    """Renders the events of one run, in order (feed them to `lines`)."""

    def __init__(self) -> None:
        self.parallel: set[str] = set()  # step ids of parallel members
        self.items: dict[str, _Items] = {}  # forEach step id → its items

    def lines(self, events: list[dict[str, Any]]) -> list[str]:
        out: list[str] = []
        for event in events:
            out += self._event(event)
        for step_id in list(self.items):  # a forEach step that never finished (it failed, or the run did)
            out += self.items.pop(step_id).summary()
        return out

    def _owner(self, step_id: str) -> str | None:
        """The forEach step an item's event belongs to: the step itself, or the one whose
        sub-workflow it runs in (`each/pick` → `each`)."""
        while step_id:
            if step_id in self.items:
                return step_id
            step_id = step_id.rpartition("/")[0]
        return None

    def _mark(self, step_id: str | None) -> str:
        return "∥ " if step_id in self.parallel else ""

    def _event(self, event: dict[str, Any]) -> list[str]:
        data, kind = event["data"], event["type"]
        where: Where = data
        step_id = event.get("step_id") or where.get("step_id", "")  # progress events say it in their data
        index = where.get("item_index")
        owner = self._owner(step_id) if index is not None else None
        if owner is not None and index is not None:
            self._count_item(kind, data, owner, step_id, index)
            if index >= ITEMS_SHOWN:
                return []  # counted by the step's summary line
        if kind == "tool_progress_delta":
            return self._progress(data)
        return self._line(kind, event, data, step_id, index)

    def _count_item(self, kind: str, data: Any, owner: str, step_id: str, index: int) -> None:
        """What a forEach step's summary line counts: the items that failed, the ones done."""
        if kind == "skill_error":
            failed: SkillError = data
            if not failed.get("will_retry", False):
                self.items[owner].failed.setdefault(index, (index, step_id, str(failed["code"]), str(failed["message"])))
        elif owner == step_id and kind == "tool_progress_delta":
            progress: ToolProgressDelta = data
            if progress["stage"] == "item_finished":
                self.items[owner].done.add(index)

    def _line(self, kind: str, event: dict[str, Any], data: Any, step_id: str, index: int | None) -> list[str]:
        if kind == "model_call_start":
            call: ModelCallStart = data
            return [f"  ◆ model call {call['step']} ({call['model']})"]
        if kind == "tool_call_start":
            start: ToolCallStart = data
            return [f"  ├─ tool {start['tool']}  [{event.get('tool_call_id')}]  args {short(start['arguments'], 80)}"]
        if kind == "skill_start":
            skill: SkillStart = data
            item = f" #{index}" if index is not None else ""
            attempt = f" attempt {skill['attempt']}" if skill["attempt"] > 1 else ""
            return [f"  │  ├─ {self._mark(step_id)}step {step_id}{item} → {event.get('skill')} [{skill['kind']}]{attempt}",
                    f"  │  │    input:  {short(skill['input'], 90)}"]
        if kind == "model_exchange":
            exchange: ModelExchange = data
            usage = exchange["usage"]
            return [f"  │  │    model {exchange['model']}: {usage['input_tokens']} in / {usage['output_tokens']} out tokens"]
        if kind == "skill_result":
            result: SkillResult = data
            return [f"  │  │    output: {short(result['output'], 90)}", f"  │  │    ✓ {result['duration_ms']} ms"]
        if kind == "skill_error":
            failed: SkillError = data
            return [f"  │  │    ✗ {failed['code']}: {short(failed['message'], 120)}"]
        if kind == "tool_call_result":
            answered: ToolCallResult = data
            return [f"  │  ✓ ok in {answered['metadata'].get('duration_ms')} ms"]
        if kind == "tool_call_error":
            refused: ToolCallError = data
            error = refused["error"]
            return [f"  │  ✗ {error['code']}: {short(error['message'], 120)}",
                    *(f"  │  {line}" for line in last_frame_lines(error.get("details") or {}))]  # error_view.py
        if kind == "agent_done":
            done: AgentDone = data
            return [f"  ■ {done['stop_reason']} after {done['steps']} model call(s)"]
        return []

    def _progress(self, progress: ToolProgressDelta) -> list[str]:
        """Workflow progress: only what the skill lines do not already say."""
        stage = progress["stage"]
        step_id = progress.get("step_id", "")
        parallel = progress.get("parallel")
        if parallel:
            self.parallel.update(parallel)
        mark = self._mark(step_id)
        workflow = progress.get("workflow")
        if stage == "step_started" and "items_total" in progress:
            total = int(progress["items_total"])
            self.items[step_id] = _Items(total)
            runs = f" → workflow {workflow}" if workflow else ""
            return [f"  │  ├─ {mark}step {step_id}{runs}: for each of {total} item{'s' if total != 1 else ''}"]
        if stage == "step_started" and workflow:
            return [f"  │  ├─ {mark}step {step_id} → workflow {workflow}"]
        if stage == "item_finished":
            return []  # counted in `_event`
        if stage == "step_finished" and step_id in self.items:
            items = self.items.pop(step_id)
            return [*items.summary(), f"  │  │    ✓ {mark}{step_id}: {items.total} item{'s' if items.total != 1 else ''} in {progress.get('duration_ms')} ms"]
        if stage == "step_skipped":
            return [f"  │  ○ {mark}step {step_id} skipped: `when: {progress.get('condition')}` did not hold"]
        if stage == "step_cancelled":
            return [f"  │  ✗ {mark}step {step_id} cancelled"]
        return []


def tree(events: list[dict[str, Any]]) -> list[str]:
    """tool → steps → skills, with durations, inputs, outputs, errors and model usage."""
    return RunTree().lines(events)

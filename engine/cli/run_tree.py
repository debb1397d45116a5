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
        step_id = event.get("step_id") or str(data.get("step_id") or "")  # progress events say it in their data
        index = data.get("item_index")
        owner = self._owner(step_id) if index is not None else None
        if owner is not None and kind == "skill_error" and not data.get("will_retry"):
            self.items[owner].failed.setdefault(index, (index, step_id, str(data.get("code")), str(data.get("message"))))
        elif owner is not None and owner == step_id and kind == "tool_progress_delta" and data.get("stage") == "item_finished":
            self.items[owner].done.add(index)
        if owner is not None and index >= ITEMS_SHOWN:
            return []  # counted by the step's summary line
        if kind == "tool_progress_delta":
            return self._progress(data)
        if kind == "model_call_start":
            return [f"  ◆ model call {data.get('step')} ({data.get('model')})"]
        if kind == "tool_call_start":
            return [f"  ├─ tool {data.get('tool')}  [{event.get('tool_call_id')}]  args {short(data.get('arguments'), 80)}"]
        if kind == "skill_start":
            item = f" #{index}" if index is not None else ""
            attempt = f" attempt {data['attempt']}" if (data.get("attempt") or 1) > 1 else ""
            return [f"  │  ├─ {self._mark(step_id)}step {step_id}{item} → {event.get('skill')} [{data.get('kind')}]{attempt}",
                    f"  │  │    input:  {short(data.get('input'), 90)}"]
        if kind == "model_exchange":
            usage = data.get("usage") or {}
            return [f"  │  │    model {data.get('model')}: {usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens"]
        if kind == "skill_result":
            return [f"  │  │    output: {short(data.get('output'), 90)}", f"  │  │    ✓ {data.get('duration_ms')} ms"]
        if kind == "skill_error":
            return [f"  │  │    ✗ {data.get('code')}: {short(data.get('message'), 120)}"]
        if kind == "tool_call_result":
            return [f"  │  ✓ ok in {(data.get('metadata') or {}).get('duration_ms')} ms"]
        if kind == "tool_call_error":
            error = data.get("error") or {}
            return [f"  │  ✗ {error.get('code')}: {short(error.get('message'), 120)}",
                    *(f"  │  {line}" for line in last_frame_lines(error.get("details") or {}))]  # error_view.py
        if kind == "agent_done":
            return [f"  ■ {data.get('stop_reason')} after {data.get('steps')} model call(s)"]
        return []

    def _progress(self, data: dict[str, Any]) -> list[str]:
        """Workflow progress: only what the skill lines do not already say."""
        stage = data.get("stage")
        step_id = str(data.get("step_id") or "")
        if data.get("parallel"):
            self.parallel.update(data["parallel"])
        mark = self._mark(step_id)
        if stage == "step_started" and "items_total" in data:
            total = int(data["items_total"])
            self.items[step_id] = _Items(total)
            runs = f" → workflow {data['workflow']}" if data.get("workflow") else ""
            return [f"  │  ├─ {mark}step {step_id}{runs}: for each of {total} item{'s' if total != 1 else ''}"]
        if stage == "step_started" and data.get("workflow"):
            return [f"  │  ├─ {mark}step {step_id} → workflow {data['workflow']}"]
        if stage == "item_finished":
            return []  # counted in `_event`
        if stage == "step_finished" and step_id in self.items:
            items = self.items.pop(step_id)
            return [*items.summary(), f"  │  │    ✓ {mark}{step_id}: {items.total} item{'s' if items.total != 1 else ''} in {data.get('duration_ms')} ms"]
        if stage == "step_skipped":
            return [f"  │  ○ {mark}step {step_id} skipped: `when: {data.get('condition')}` did not hold"]
        if stage == "step_cancelled":
            return [f"  │  ✗ {mark}step {step_id} cancelled"]
        return []


def tree(events: list[dict[str, Any]]) -> list[str]:
    """tool → steps → skills, with durations, inputs, outputs, errors and model usage."""
    return RunTree().lines(events)

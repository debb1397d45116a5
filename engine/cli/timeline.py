"""The live timeline on stderr: what runs, step by step, with durations.

On a terminal, streaming progress rewrites one status line; otherwise every event that says
something is one plain line (good for CI logs and pipes).

Workflows beyond a straight line: a skipped step says why (its `when`), parallel members are
marked `∥`, a forEach step shows its first ITEMS_SHOWN items (`#index`) and then one line
with the count (a failed item is always shown): every event of a later item (its skill
progress, a sub-workflow's steps) is left out. Sub-workflow steps read `parent/step`.
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping, TextIO

from ..errors import ErrorCode
from ..providers.pricing import format_usd, usage_cost
from ..runs.events import Event
from ..runs.payloads import (
    AgentDone,
    AgentError,
    AgentStart,
    ConfirmationRequired,
    ModelCallStart,
    SkillError,
    SkillProgressDelta,
    SkillResult,
    SkillStart,
    ToolCallError,
    ToolCallResult,
    ToolCallStart,
    ToolProgressDelta,
    Where,
)

ITEMS_SHOWN = 10  # items of a forEach step shown one by one; the rest are counted


class Timeline:
    def __init__(self, stream: TextIO, *, live: bool):
        self.stream = stream
        self.live = live
        self._status_shown = False
        self._steps: dict[str, str] = {}
        self._items: dict[str, int] = {}  # forEach step id → items_total
        self._parallel: set[str] = set()  # step ids that run in a parallel group
        self._tools: dict[str | None, str] = {}  # tool call id → the tool it asked for (named in its error's hints)

    def __call__(self, event: Event) -> None:
        line = self._line(event)
        if line is None:
            return
        if self.live and event.type == "skill_progress_delta" and _stage(event.data) == "streaming":
            self.stream.write("\r\x1b[K" + line)
            self._status_shown = True
        else:
            if self._status_shown:
                self.stream.write("\r\x1b[K")
                self._status_shown = False
            self.stream.write(line + "\n")
        self.stream.flush()

    def _line(self, event: Event) -> str | None:
        data = event.data
        kind = event.type
        if kind != "skill_error" and _hidden_item(data):
            return None
        if kind.startswith("agent_") or kind == "model_call_start":
            return _agent_line(kind, data, event.run_id)
        if kind == "tool_call_start":
            start: ToolCallStart = data
            self._tools[event.tool_call_id] = start["tool"]
            return f"▶ {start['tool']}  ({event.run_id})"
        if kind == "tool_progress_delta":
            return self._progress(data)
        if kind.startswith("skill_"):
            return self._skill_line(kind, event, data)
        if kind == "confirmation_required":
            asked: ConfirmationRequired = data
            return f"  ? {asked['tool']} needs confirmation"
        if kind == "tool_call_result":
            answered: ToolCallResult = data
            usage: Any = answered["metadata"].get("usage")
            cost = usage_cost(usage)  # priced models only: without prices the line stays as it was
            spent = f", {usage['input_tokens'] + usage['output_tokens']:,} tokens ({format_usd(cost)})" if cost is not None else ""
            return f"✓ done in {_ms(answered['metadata'].get('duration_ms'))}{spent}"
        if kind == "tool_call_error":
            failed: ToolCallError = data
            error = failed["error"]
            line = f"✗ {error['code']}: {error['message']}  ({_ms(failed['metadata'].get('duration_ms'))})"
            hints = error_hints(error, self._tools.pop(event.tool_call_id, None))
            return "\n".join([line, *(f"  {hint}" for hint in hints)])
        return None

    def _skill_line(self, kind: str, event: Event, data: Any) -> str | None:
        if kind == "skill_start":
            start: SkillStart = data
            attempt = f" (attempt {start['attempt']})" if start["attempt"] > 1 else ""
            return f"  ▶ {self._steps.get(event.step_id or '', '')} {self._who(event.step_id, data)} → {event.skill} [{start['kind']}]{attempt}"
        if kind == "skill_progress_delta":
            progress: SkillProgressDelta = data
            extras = [f"{k}={v}" for k, v in progress.items() if k in ("model", "attempt") and v is not None]
            suffix = f" ({', '.join(extras)})" if extras else ""
            return f"      {progress['message']}{suffix}"
        if kind == "skill_result":
            result: SkillResult = data
            return f"  ✓ {self._who(event.step_id, data)}  {_ms(result['duration_ms'])}"
        if kind == "skill_error":
            failed: SkillError = data
            retry = " — retrying" if failed.get("will_retry") else ""
            return f"  ✗ {self._who(event.step_id, data)}: {failed['code']}: {failed['message']}{retry}"
        return None

    def _progress(self, progress: ToolProgressDelta) -> str | None:
        stage = progress["stage"]
        step_id = str(progress.get("step_id"))
        if progress.get("parallel"):
            self._parallel.add(step_id)
        if stage == "step_started":
            self._steps[step_id] = f"[{progress['step']}/{progress['of']}]"
            if "items_total" in progress:
                self._items[step_id] = progress["items_total"]
                return f"  ▶ {self._steps[step_id]} {self._mark(step_id)}{step_id}: {_items(progress['items_total'])}"
            if progress.get("workflow"):
                return f"  ▶ {self._steps[step_id]} {self._mark(step_id)}{step_id} → workflow {progress['workflow']}"
            return None  # skill_start says the same with the skill's name
        if stage == "step_finished":
            total = self._items.pop(step_id, None)
            if total is None:
                return None  # skill_result / skill_error carry the duration
            more = f" (items {ITEMS_SHOWN}–{total - 1} not shown one by one)" if total > ITEMS_SHOWN else ""
            return f"  ✓ {self._mark(step_id)}{step_id}: {_items(total)}  {_ms(progress.get('duration_ms'))}{more}"
        if stage in ("prepared", "done") and progress.get("step_id") is not None:
            return None  # a sub-workflow: its step's line names it, its steps' lines say `step/…`
        if stage == "item_finished":
            return None  # counted at step_finished; failures show as skill_error
        if stage == "step_skipped":
            return f"  ○ {self._mark(step_id)}{step_id} skipped: `when: {progress.get('condition')}` did not hold"
        if stage == "step_cancelled":
            return f"  ✗ {self._mark(step_id)}{step_id} cancelled"
        return f"  · {progress['message']}"

    def _mark(self, step_id: str | None) -> str:
        return "∥ " if step_id in self._parallel else ""

    def _who(self, step_id: str | None, where: Where) -> str:
        item = f" #{where['item_index']}" if "item_index" in where else ""
        return f"{self._mark(step_id)}{step_id}{item}"


def _agent_line(kind: str, data: Any, run_id: str) -> str | None:
    if kind == "agent_start":
        start: AgentStart = data
        return f"▶ agent on {start['model']} with tools: {', '.join(start['tools']) or 'none'}  ({run_id})"
    if kind == "model_call_start":
        call: ModelCallStart = data
        return f"· model call {call['step']} ({call['model']})"
    if kind == "agent_done":
        done: AgentDone = data
        usage = done["usage"]
        tokens = usage["input_tokens"] + usage["output_tokens"]
        cost = usage_cost(usage)
        spent = f" ({format_usd(cost)})" if cost is not None else ""
        return f"■ {done['stop_reason']} after {done['steps']} model call(s), {tokens:,} tokens{spent}, {_ms(done['duration_ms'])}"
    if kind == "agent_error":
        failed: AgentError = data
        return f"✗ {failed['message']}"
    return None


def _stage(progress: SkillProgressDelta) -> str | None:
    return progress.get("stage")


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _hidden_item(where: Where) -> bool:
    index = where.get("item_index")
    return index is not None and index >= ITEMS_SHOWN


def error_hints(error: Mapping[str, Any], tool: str | None = None) -> list[str]:
    """What the user can do next, from the error's details: for an unknown `tool`, the known
    tool its name is closest to (a typo), then which tools exist."""
    details = error.get("details") or {}
    if error.get("code") == ErrorCode.UNKNOWN_TOOL and "available_tools" in details:
        available = details["available_tools"]
        close = difflib.get_close_matches(tool, available, n=1) if tool and available else []
        listed = f"available tools: {', '.join(available)}" if available else "no tools are available"
        return [f"did you mean {close[0]!r}?", listed] if close else [listed]
    return []


def _ms(value: Any) -> str:
    if value is None:
        return ""
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.1f} ms"

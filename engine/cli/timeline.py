"""The live timeline on stderr: what runs, step by step, with durations.

On a terminal, streaming progress rewrites one status line; otherwise every event that says
something is one plain line (good for CI logs and pipes).
"""

from __future__ import annotations

from typing import Any, TextIO

from ..events import Event


class Timeline:
    def __init__(self, stream: TextIO, *, live: bool):
        self.stream = stream
        self.live = live
        self._status_shown = False
        self._steps: dict[str, str] = {}

    def __call__(self, event: Event) -> None:
        line = self._line(event)
        if line is None:
            return
        if self.live and event.type == "skill_progress_delta" and event.data.get("stage") == "streaming":
            self.stream.write("\r\x1b[K" + line)
            self._status_shown = True
        else:
            if self._status_shown:
                self.stream.write("\r\x1b[K")
                self._status_shown = False
            self.stream.write(line + "\n")
        self.stream.flush()

    def _line(self, event: Event) -> str | None:
        data: dict[str, Any] = event.data
        kind = event.type
        if kind == "agent_start":
            return f"▶ agent on {data['model']} with tools: {', '.join(data['tools']) or 'none'}  ({event.run_id})"
        if kind == "model_call_start":
            return f"· model call {data['step']} ({data['model']})"
        if kind == "agent_done":
            usage = data.get("usage") or {}
            tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
            return f"■ {data['stop_reason']} after {data['steps']} model call(s), {tokens:,} tokens, {_ms(data.get('duration_ms'))}"
        if kind == "agent_error":
            return f"✗ {data.get('message')}"
        if kind == "tool_call_start":
            return f"▶ {data['tool']}  ({event.run_id})"
        if kind == "tool_progress_delta":
            stage = data.get("stage")
            if stage == "step_started":
                self._steps[str(data["step_id"])] = f"[{data['step']}/{data['of']}]"
                return None  # skill_start says the same with the skill's name
            if stage == "step_finished":
                return None  # skill_result / skill_error carry the duration
            return f"  · {data['message']}"
        if kind == "skill_start":
            attempt = f" (attempt {data['attempt']})" if data.get("attempt", 1) > 1 else ""
            return f"  ▶ {self._steps.get(event.step_id or '', '')} {event.step_id} → {event.skill} [{data.get('kind')}]{attempt}"
        if kind == "skill_progress_delta":
            extras = [f"{k}={v}" for k, v in data.items() if k in ("model", "attempt") and v is not None]
            suffix = f" ({', '.join(extras)})" if extras else ""
            return f"      {data.get('message', '')}{suffix}"
        if kind == "skill_result":
            return f"  ✓ {event.step_id}  {_ms(data.get('duration_ms'))}"
        if kind == "skill_error":
            retry = " — retrying" if data.get("will_retry") else ""
            return f"  ✗ {event.step_id}: {data.get('code')}: {data.get('message')}{retry}"
        if kind == "confirmation_required":
            return f"  ? {data['tool']} needs confirmation"
        if kind == "tool_call_result":
            return f"✓ done in {_ms(data['metadata'].get('duration_ms'))}"
        if kind == "tool_call_error":
            error = data["error"]
            line = f"✗ {error['code']}: {error['message']}  ({_ms(data['metadata'].get('duration_ms'))})"
            return "\n".join([line, *(f"  {hint}" for hint in error_hints(error))])
        return None


def error_hints(error: dict[str, Any]) -> list[str]:
    """What the user can do next, from the error's details (e.g. which tools exist)."""
    details = error.get("details") or {}
    if error.get("code") == "unknown_tool" and "available_tools" in details:
        available = details["available_tools"]
        return [f"available tools: {', '.join(available)}" if available else "no tools are available"]
    return []


def _ms(value: Any) -> str:
    if value is None:
        return ""
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.1f} ms"

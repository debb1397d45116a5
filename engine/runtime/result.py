"""ToolResult: what every tool call returns, and the short text a model reads back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ToolError:
    """Why a call failed: `code` is an ErrorCode member (equal to its string), or a tool type's own code."""

    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one tool call; `ok` says which of `data` / `error` is meaningful."""

    ok: bool
    tool: str
    run_id: str
    tool_call_id: str
    data: Any = None
    error: ToolError | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # The call's last event's payload (`ok`, `data` or `error`, `metadata`) as the run's redaction
    # left it; None for a result no run emitted.
    shown: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def as_shown(self) -> "ToolResult":
        """This result as it may leave the process (an HTTP body, SSE, `/mcp`, the CLI's stdout):
        its data and error as the run's events show them — a value under a sensitive key, and
        every secret the run knows, `[REDACTED]` — so that every door answers the same. The
        ToolResult itself (the Engine API's) keeps the data whole: the program is the operator's."""
        shown = self.shown
        if shown is None:
            return self
        error = shown.get("error")
        return ToolResult(self.ok, self.tool, self.run_id, self.tool_call_id, shown.get("data"),
                          ToolError(error["code"], error["message"], error.get("details") or {}) if error else None,
                          shown.get("metadata", self.metadata))

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "tool": self.tool,
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "data": self.data,
            "error": self.error.to_dict() if self.error else None,
            "metadata": self.metadata,
        }

    def model_text(self) -> str:
        """The text handed back to a model: a header line, then the content or the advice."""
        if self.ok:
            render = getattr(self.data, "render_model_text", None)
            if callable(render):  # data that knows how it reads best (e.g. a fetch result)
                return str(render(self))
            body = self.data if isinstance(self.data, str) else _json_text(self.data)
            return f"[{self.tool} succeeded in {self.metadata.get('duration_ms', 0)} ms, {len(body)} chars]\n{body}"
        assert self.error is not None  # invariant of construction, not input validation
        lines = [f"[{self.tool} failed: {self.error.code}] {self.error.message}"]
        for problem in self.error.details.get("errors", [])[:10]:
            if isinstance(problem, dict):
                lines.append(f"- {problem.get('pointer', '/')}: {problem.get('message', '')}")
            else:
                lines.append(f"- {problem}")
        if "schema" in self.error.details:
            lines.append("Expected arguments schema: " + json.dumps(self.error.details["schema"], ensure_ascii=False, default=str))
        if "available_tools" in self.error.details:
            lines.append("Available tools: " + ", ".join(self.error.details["available_tools"]))
        lines.append(ErrorCode.advice_for(self.error.code))
        return "\n".join(lines)


def _json_text(data: Any) -> str:
    """JSON for a model; data no JSON writer takes (an int of 5,000 digits, nesting without end) as a note."""
    try:
        return json.dumps(data, ensure_ascii=False, default=str)
    except (ValueError, RecursionError) as exc:
        return f"(the result cannot be shown as JSON: {type(exc).__name__}: {str(exc)[:200]})"

"""ToolResult: what every tool call returns, and the short text a model reads back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Error codes the router can return, and what a model should do about each.
ERROR_ADVICE: dict[str, str] = {
    "unknown_tool": "Call one of the available tools instead.",
    "tool_disabled": "This tool is switched off; do not call it again.",
    "not_allowed": "This tool may not be called here; do not call it again.",
    "invalid_arguments": "Fix the arguments to match the schema and call again.",
    "confirmation_denied": "The user declined this call; do not repeat it unless the user asks.",
    "timeout": "The tool ran out of time; retry only with a smaller request.",
    "invalid_model_output": "The model behind this tool gave unusable output; one retry may help.",
    "execution_error": "Retrying with the same arguments will most likely fail the same way.",
    "cancelled": "The call was cancelled.",
}


@dataclass(frozen=True, slots=True)
class ToolError:
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
            body = self.data if isinstance(self.data, str) else json.dumps(self.data, ensure_ascii=False)
            return f"[{self.tool} succeeded in {self.metadata.get('duration_ms', 0)} ms, {len(body)} chars]\n{body}"
        assert self.error is not None  # invariant of construction, not input validation
        lines = [f"[{self.tool} failed: {self.error.code}] {self.error.message}"]
        for problem in self.error.details.get("errors", [])[:10]:
            lines.append(f"- {problem.get('pointer', '/')}: {problem.get('message', '')}")
        if "schema" in self.error.details:
            lines.append("Expected arguments schema: " + json.dumps(self.error.details["schema"], ensure_ascii=False))
        if "available_tools" in self.error.details:
            lines.append("Available tools: " + ", ".join(self.error.details["available_tools"]))
        lines.append(ERROR_ADVICE.get(self.error.code, "Do not retry the same call."))
        return "\n".join(lines)

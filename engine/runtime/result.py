"""ToolResult: what every tool call returns, and the short text a model reads back."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Error codes the router can return, and what a model should do about each.
ERROR_ADVICE: dict[str, str] = {
    "unknown_tool": "Call one of the available tools instead.",
    "tool_disabled": "This tool is switched off; do not call it again.",
    "config_error": "This tool's configuration is broken; do not call it again until it is fixed.",
    "not_allowed": "This tool may not be called here; do not call it again.",
    "invalid_arguments": "Fix the arguments to match the schema and call again.",
    "confirmation_denied": "The user declined this call; do not repeat it unless the user asks.",
    "timeout": "The tool ran out of time; retry only with a smaller request.",
    "limit_exceeded": "The call asked for more work than this server allows (the message names the limit); "
    "retry only with a smaller request, e.g. fewer items.",
    "invalid_model_output": "The model behind this tool gave unusable output; one retry may help.",
    "execution_error": "Retrying with the same arguments will most likely fail the same way.",
    "cancelled": "The call was cancelled.",
    "sensitive_arguments": "Never send passwords, tokens or keys to tools; call again without them.",
    "approval_unavailable": "This tool needs a person's approval and this client cannot ask for it; do not retry. "
    "Use a client that supports elicitation, or a server started with --yes.",
    # fetch (engine/executors/fetch): say what failed and that the same URL will not do better
    "blocked": "This tool's network policy refuses that URL; retrying it will not help. Do not fetch it again.",
    "invalid_url": "Give an absolute http:// or https:// URL and call again.",
    "http_error": "The server answered with an error status; retrying the same URL will not help. Try another URL or answer without it.",
    "fetch_failed": "The page could not be fetched; retrying the same URL will not help. Try another URL or answer without it.",
    "fetch_timeout": "The server was too slow; retrying the same URL will not help. Try another URL or answer without it.",
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
        lines.append(ERROR_ADVICE.get(self.error.code, "Do not retry the same call."))
        return "\n".join(lines)


def _json_text(data: Any) -> str:
    """JSON for a model; data no JSON writer takes (an int of 5,000 digits, nesting without end) as a note."""
    try:
        return json.dumps(data, ensure_ascii=False, default=str)
    except (ValueError, RecursionError) as exc:
        return f"(the result cannot be shown as JSON: {type(exc).__name__}: {str(exc)[:200]})"

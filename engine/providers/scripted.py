"""The `scripted` provider: replays model turns from a YAML file, for demos and tests.

```yaml
# config/models.yaml
models:
  demo: {provider: scripted, options: {script: scripts/demo.yaml}}

# scripts/demo.yaml
turns:
  - text: Let me analyse that.
    tool_calls:
      - {name: textReport, arguments: {text: "hello world"}}
  - text: The text has two words.
  - error: rate limited          # raises a ProviderError
    retryable: true
  - json: {title: Engineer}       # for prompt skills with an output schema
```

Each request takes the next turn; text is streamed in small chunks. When the script runs
out, the request fails with a clear error.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable

from ..spec.models import ModelSpec
from ..spec.yaml_source import YamlLoadError, load_yaml_file
from .base import ModelRequest, ModelResponse, ProviderError, ToolCall, Usage

CHUNK_CHARS = 16


class ScriptedProvider:
    def __init__(self, turns: list[dict[str, Any]], name: str = "script"):
        self.turns = turns
        self.name = name
        self.position = 0
        self.requests: list[ModelRequest] = []  # what was asked, for tests and demos

    @classmethod
    def from_spec(cls, spec: ModelSpec, root: Path) -> "ScriptedProvider":
        script = spec.options.get("script")
        if not isinstance(script, str):
            raise ProviderError("a scripted model needs options.script: the path of a YAML file of turns")
        path = (root / script).resolve()
        try:
            data, _ = load_yaml_file(path, script)
        except YamlLoadError as exc:
            raise ProviderError(str(exc.issue)) from None
        turns = data.get("turns") if isinstance(data, dict) else None
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            raise ProviderError(f"{script}: expected `turns:` with a list of turns")
        return cls(turns, script)

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        self.requests.append(request)
        if self.position >= len(self.turns):
            raise ProviderError(f"{self.name}: the script has no turn {self.position + 1} (it has {len(self.turns)})")
        turn = self.turns[self.position]
        self.position += 1
        if "error" in turn:
            raise ProviderError(str(turn["error"]), retryable=bool(turn.get("retryable", False)))
        text = json.dumps(turn["json"], ensure_ascii=False) if "json" in turn else str(turn.get("text", ""))
        if on_text is not None:
            for start in range(0, len(text), CHUNK_CHARS):
                on_text(text[start : start + CHUNK_CHARS])
                await asyncio.sleep(0)
        raw_calls = turn.get("tool_calls") or []
        if not isinstance(raw_calls, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in raw_calls):
            raise ProviderError(f"{self.name}: turn {self.position}: tool_calls must be a list of {{name, arguments}}")
        calls = tuple(
            ToolCall(
                str(call.get("id") or f"call_{self.position}_{index}"),
                str(call["name"]),
                call["arguments"] if isinstance(call.get("arguments"), str) else json.dumps(call.get("arguments") or {}),
            )
            for index, call in enumerate(raw_calls)
        )
        input_chars = sum(len(m.content) for m in request.messages)
        usage = Usage(int(turn.get("input_tokens", max(1, input_chars // 4))), int(turn.get("output_tokens", max(1, len(text) // 4))))
        return ModelResponse(text, usage, "tool_calls" if calls else "stop", calls)


__all__ = ["ScriptedProvider"]

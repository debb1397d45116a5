"""The agent loop's own logic, with in-process providers (no HTTP): ids, provider bugs, scripts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from engine import Engine
from engine.providers.base import ModelRequest, ModelResponse, ToolCall
from engine.providers.registry import register_provider
from engine.runtime.agent import AgentLimits
from engine.spec.models import ModelSpec
from fake_llm_servers import write_project


class ListProvider:
    """Answers with the responses it was given, in order; raises an exception instance when given one."""

    queues: dict[str, list[Any]] = {}

    def __init__(self, spec: ModelSpec):
        self.replies = self.queues[spec.options["queue"]]
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply


register_provider("test-agent-list", ListProvider)


def engine_with(tmp_path: Path, replies: list[Any]) -> Engine:
    ListProvider.queues[str(tmp_path)] = replies
    root = write_project(tmp_path / "p", {"list": {"provider": "test-agent-list", "options": {"queue": str(tmp_path)}}})
    return Engine.from_dir(root)


def test_duplicate_call_ids_in_one_turn_are_made_unique(tmp_path: Path) -> None:
    engine = engine_with(tmp_path, [
        ModelResponse("", tool_calls=(ToolCall("same", "echo", '{"name": "a"}'), ToolCall("same", "echo", '{"name": "b"}'),
                                      ToolCall("", "echo", '{"name": "c"}'))),
        ModelResponse("ok"),
    ])
    result = asyncio.run(engine.agent("list", limits=AgentLimits(total_timeout=5)).run("go"))
    ids = [r.tool_call_id for r in result.tool_results]
    assert len(set(ids)) == 3 and ids[0] == "same"
    assert [r.data["name"] for r in result.tool_results] == ["a", "b", "c"]
    assistant = next(m for m in result.messages if m.tool_calls)
    assert [c.id for c in assistant.tool_calls] == ids  # the transcript uses the same ids as the results


def test_a_provider_bug_stops_the_run_with_error(tmp_path: Path) -> None:
    engine = engine_with(tmp_path, [KeyError("choices")])
    events: list[Any] = []
    result = asyncio.run(engine.agent("list", limits=AgentLimits(total_timeout=5)).run("go", on_event=events.append))
    assert result.stop_reason == "error" and "KeyError" in result.error
    assert [e.type for e in events][-2:] == ["agent_error", "agent_done"]


def test_tool_choice_none_keeps_tools_declared(tmp_path: Path) -> None:
    engine = engine_with(tmp_path, [ModelResponse("just talk")])
    agent = engine.agent("list", tool_choice="none", limits=AgentLimits(total_timeout=5))
    assert asyncio.run(agent.run("go")).answer == "just talk"
    provider, _ = engine.project.provider("list")
    request = provider.requests[0]  # type: ignore[attr-defined]
    assert request.tool_choice == "none" and {t["name"] for t in request.tools} == {"echo", "nap", "sendEmail", "deleteRecord"}


def test_mock_model_respects_tool_choice_none(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {"mock": {"provider": "mock"}})
    result = asyncio.run(Engine.from_dir(root).agent("mock", tool_choice="none").run("echo Ada"))
    assert result.stop_reason == "answer" and result.tool_results == []


def test_scripted_turn_with_a_bad_tool_call_is_a_clear_error(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", {"s": {"provider": "scripted", "options": {"script": "script.yaml"}}})
    (root / "script.yaml").write_text("turns:\n  - tool_calls: [{arguments: {name: x}}]\n")
    result = asyncio.run(Engine.from_dir(root).agent("s").run("go"))
    assert result.stop_reason == "error" and "tool_calls must be a list of {name, arguments}" in result.error

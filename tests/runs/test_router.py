"""The router: every error code, argument handling, defaults, results, retries and timeouts.

Runs against tests/projects/router (python skills only, no model) and temporary copies of it
with a `config/engine.yaml` router policy.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from engine import Engine, Event, ToolResult

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "router"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.from_dir(PROJECT)


def call(engine: Engine, name: str, args: Any = None, **options: Any) -> tuple[ToolResult, list[Event]]:
    events: list[Event] = []
    result = asyncio.run(engine.call_tool(name, args, on_event=events.append, **options))
    return result, events


def assert_error(result: ToolResult, code: str) -> None:
    assert not result.ok, result.data
    assert result.error is not None and result.error.code == code, result.error
    assert result.data is None
    assert result.error.message


# ─── error codes ────────────────────────────────────────────────────────────────────────


def test_unknown_tool_lists_the_available_tools(engine: Engine) -> None:
    result, events = call(engine, "nope", {})
    assert_error(result, "unknown_tool")
    available = result.error.details["available_tools"]
    assert set(available) == {"echo", "dangerous", "slow", "slowStep", "boom", "flaky"}  # not the disabled one
    text = result.model_text()
    assert "nope" in text and "echo" in text
    assert [e.type for e in events] == ["tool_call_start", "tool_call_error"]


def test_tool_disabled(engine: Engine) -> None:
    result, _ = call(engine, "echoOff", {"name": "x"})
    assert_error(result, "tool_disabled")
    assert "do not call it again" in result.model_text()


def test_allowed_tools_subset_per_call(engine: Engine) -> None:
    result, _ = call(engine, "echo", {"name": "x"}, allowed_tools=["boom"])
    assert_error(result, "not_allowed")
    result, _ = call(engine, "echo", {"name": "x"}, allowed_tools=["boom", "echo"])
    assert result.ok, result.error
    result, _ = call(engine, "echo", {"name": "x"}, allowed_tools=[])
    assert_error(result, "not_allowed")


@pytest.fixture
def policy_engine(tmp_path: Path) -> Engine:
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "config").mkdir()
    (root / "config" / "engine.yaml").write_text(
        "router:\n  allow: ['ech*', 'slow*', 'boom']\n  deny: ['boom', '*Step']\n"
    )
    return Engine.from_dir(root)


def test_router_allow_and_deny_globs(policy_engine: Engine) -> None:
    assert call(policy_engine, "echo", {"name": "x"})[0].ok
    assert_error(call(policy_engine, "boom", {})[0], "not_allowed")  # deny wins over allow
    assert_error(call(policy_engine, "slowStep", {})[0], "not_allowed")  # deny glob
    assert_error(call(policy_engine, "flaky", {"key": "k", "failures": 0})[0], "not_allowed")  # not allowed
    result, _ = call(policy_engine, "nope", {})
    assert_error(result, "unknown_tool")
    assert set(result.error.details["available_tools"]) == {"echo", "slow"}  # only what may be called
    names = {t["function"]["name"] for t in policy_engine.tool_schemas("openai")}
    assert names == {"echo", "slow"}


def test_not_allowed_is_checked_before_arguments(policy_engine: Engine) -> None:
    result, _ = call(policy_engine, "boom", "{not json")
    assert_error(result, "not_allowed")


# ─── arguments ──────────────────────────────────────────────────────────────────────────


def test_arguments_as_invalid_json_string(engine: Engine) -> None:
    result, _ = call(engine, "echo", '{"name": "x",')
    assert_error(result, "invalid_arguments")
    assert "not valid JSON" in result.error.message
    text = result.model_text()
    assert "schema" in text.lower() and "call again" in text


def test_arguments_as_valid_json_string(engine: Engine) -> None:
    result, _ = call(engine, "echo", '{"name": "x", "count": 2}')
    assert result.ok, result.error
    assert result.data == {"name": "x", "count": 2, "mode": "short"}


def test_empty_string_arguments_mean_no_arguments(engine: Engine) -> None:
    result, _ = call(engine, "boom", "")
    assert_error(result, "execution_error")  # got past argument checks, defaults applied
    assert "kaboom: because" in result.error.message


@pytest.mark.parametrize("arguments", ["[1, 2]", '"text"', "42", "true", [1, 2], 7])
def test_arguments_that_are_not_an_object(engine: Engine, arguments: Any) -> None:
    result, _ = call(engine, "echo", arguments)
    assert_error(result, "invalid_arguments")
    assert "object" in result.error.message


def test_schema_errors_report_every_error_with_its_pointer(engine: Engine) -> None:
    result, _ = call(engine, "echo", {"name": "", "count": "three", "extra": 1})
    assert_error(result, "invalid_arguments")
    errors = result.error.details["errors"]
    pointers = sorted(e["pointer"] for e in errors)
    assert "/name" in pointers and "/count" in pointers
    assert len(errors) == 3  # minLength, type, additionalProperties
    assert any("extra" in e["message"] for e in errors)
    assert result.error.details["schema"] == engine.project.tools["echo"].parameters
    text = result.model_text()
    assert "- /name:" in text and "- /count:" in text
    assert "Fix the arguments" in text


def test_two_bad_fields_give_two_errors(engine: Engine) -> None:
    result, _ = call(engine, "echo", {"name": 5, "count": 0})
    assert_error(result, "invalid_arguments")
    assert sorted(e["pointer"] for e in result.error.details["errors"]) == ["/count", "/name"]


def test_missing_required_argument(engine: Engine) -> None:
    result, _ = call(engine, "echo", {})
    assert_error(result, "invalid_arguments")
    [error] = result.error.details["errors"]
    assert "name" in error["message"] and error["keyword"] == "required"


def test_declared_defaults_are_applied(engine: Engine) -> None:
    result, _ = call(engine, "echo", {"name": "x"})
    assert result.ok, result.error
    assert result.data == {"name": "x", "count": 3, "mode": "short"}


def test_caller_arguments_are_not_mutated(engine: Engine) -> None:
    args = {"name": "x"}
    call(engine, "echo", args)
    assert args == {"name": "x"}


def test_router_never_raises_for_bad_calls(engine: Engine) -> None:
    for name, args in [("", None), ("echo", b"{}"), ("echo", {"name": object()}), ("x" * 10_000, "{}"), ("echo", "\ud800")]:
        result, _ = call(engine, name, args)
        assert not result.ok
        json.dumps(result.to_dict(), default=str)


# ─── running ────────────────────────────────────────────────────────────────────────────


def test_tool_timeout(engine: Engine) -> None:
    result, events = call(engine, "slow", {"seconds": 5})
    assert_error(result, "timeout")
    assert result.metadata["duration_ms"] < 2000
    assert "0.05" in result.error.message
    assert "smaller request" in result.model_text()
    assert events[-1].type == "tool_call_error"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_step_timeout(engine: Engine) -> None:
    result, events = call(engine, "slowStep", {"seconds": 5})
    assert_error(result, "timeout")
    assert result.metadata["duration_ms"] < 2000
    errors = [e for e in events if e.type == "skill_error"]
    assert len(errors) == 1 and errors[0].step_id == "sleep" and errors[0].data["code"] == "timeout"


def test_fast_enough_call_passes_the_timeouts(engine: Engine) -> None:
    assert call(engine, "slow", {"seconds": 0.001})[0].ok
    assert call(engine, "slowStep", {"seconds": 0.001})[0].ok


def test_execution_error_from_a_raising_skill(engine: Engine) -> None:
    result, events = call(engine, "boom", {"why": "test"})
    assert_error(result, "execution_error")
    assert "ValueError" in result.error.message and "kaboom: test" in result.error.message
    assert "Retrying" in result.model_text()
    types = [e.type for e in events]
    assert "skill_error" in types and types[-1] == "tool_call_error"


def test_confirmation_denied_without_an_approver(engine: Engine) -> None:
    result, events = call(engine, "dangerous", {"name": "x"})
    assert_error(result, "confirmation_denied")
    assert "confirmation_required" in [e.type for e in events]
    assert "skill_start" not in [e.type for e in events]  # nothing ran


def test_confirmation_approved_and_declined_by_an_approver(engine: Engine) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def yes(tool: Any, args: dict[str, Any], tool_call_id: str) -> bool:
        seen.append((tool.name, args))
        return True

    async def no(tool: Any, args: dict[str, Any], tool_call_id: str) -> bool:
        return False

    result, _ = call(engine, "dangerous", {"name": "x"}, approve=yes)
    assert result.ok and result.data == {"name": "x"}
    assert seen == [("dangerous", {"name": "x"})]
    assert_error(call(engine, "dangerous", {"name": "x"}, approve=no)[0], "confirmation_denied")


def test_step_retry_fails_twice_then_succeeds(engine: Engine) -> None:
    key = uuid.uuid4().hex
    result, events = call(engine, "flaky", {"key": key, "failures": 2})
    assert result.ok, result.error
    assert result.data == {"attempt": 3, "calls": 3}
    errors = [e for e in events if e.type == "skill_error"]
    assert [e.data["attempt"] for e in errors] == [1, 2]
    assert all(e.data["will_retry"] for e in errors)
    starts = [e.data["attempt"] for e in events if e.type == "skill_start"]
    assert starts == [1, 2, 3]


def test_step_retry_gives_up_after_the_retries(engine: Engine) -> None:
    key = uuid.uuid4().hex
    result, events = call(engine, "flaky", {"key": key, "failures": 5})
    assert_error(result, "execution_error")
    assert "failure 3 of 5" in result.error.message
    errors = [e for e in events if e.type == "skill_error"]
    assert [e.data["will_retry"] for e in errors] == [True, True, False]


# ─── results ────────────────────────────────────────────────────────────────────────────


def test_tool_result_shape_on_success(engine: Engine) -> None:
    result, events = call(engine, "echo", {"name": "x"}, tool_call_id="call_fixed", run_id="run_fixed")
    out = result.to_dict()
    assert list(out) == ["ok", "tool", "run_id", "tool_call_id", "data", "error", "metadata"]
    assert out["ok"] is True and out["tool"] == "echo" and out["error"] is None
    assert out["run_id"] == "run_fixed" and out["tool_call_id"] == "call_fixed"
    assert isinstance(out["metadata"]["duration_ms"], (int, float)) and out["metadata"]["duration_ms"] >= 0
    json.dumps(out)
    assert events[-1].type == "tool_call_result" and events[-1].result is result


def test_tool_result_shape_on_failure(engine: Engine) -> None:
    result, _ = call(engine, "echo", {"name": 1})
    out = result.to_dict()
    assert out["ok"] is False and out["data"] is None
    assert set(out["error"]) == {"code", "message", "details"}
    assert out["error"]["code"] == "invalid_arguments"
    assert "duration_ms" in out["metadata"]
    assert result.run_id.startswith("run_") and result.tool_call_id.startswith("call_")
    json.dumps(out)


def test_model_text_on_success_is_a_header_then_the_data(engine: Engine) -> None:
    result, _ = call(engine, "echo", {"name": "x"})
    header, _, body = result.model_text().partition("\n")
    assert "echo" in header and "succeeded" in header
    assert json.loads(body) == result.data


def test_model_text_on_failure_says_what_and_whether_to_retry(engine: Engine) -> None:
    expectations = {
        ("nope", "{}"): ("unknown_tool", "available"),
        ("echoOff", "{}"): ("tool_disabled", "do not call it again"),
        ("echo", "{}"): ("invalid_arguments", "call again"),
        ("boom", "{}"): ("execution_error", "same arguments"),
        ("dangerous", "{}"): ("confirmation_denied", "do not repeat"),
    }
    for (name, args), (code, advice) in expectations.items():
        result, _ = call(engine, name, args)
        text = result.model_text()
        assert code in text.splitlines()[0], text
        assert advice in text.lower(), text


def test_model_text_of_data_that_is_not_plain_json() -> None:
    import datetime

    from engine import ToolError

    result = ToolResult(True, "t", "run_1", "call_1", {"when": datetime.date(2026, 1, 2)}, None, {"duration_ms": 1})
    assert json.loads(result.model_text().partition("\n")[2]) == {"when": "2026-01-02"}
    text_result = ToolResult(True, "t", "run_1", "call_1", "plain text", None, {"duration_ms": 1})
    assert text_result.model_text().endswith("\nplain text")
    failed = ToolResult(False, "t", "run_1", "call_1", None, ToolError("invalid_model_output", "bad", {"errors": ["as text"]}))
    assert "- as text" in failed.model_text()


# ─── bugs found by this suite, fixed in the engine ─────────────────────────────────────


def test_arguments_as_bytes_that_are_not_utf8(engine: Engine) -> None:
    result, _ = call(engine, "echo", b'{"name": "\xff"}')
    assert_error(result, "invalid_arguments")


def test_skill_raising_timeout_error_without_a_step_timeout(engine: Engine) -> None:
    result, events = call(engine, "boom", {"why": "timeout"})
    assert not result.ok and result.error.code in ("timeout", "execution_error")
    assert "NoneType" not in result.error.message and "format" not in result.error.message
    assert [e.type for e in events if e.type == "skill_error"] == ["skill_error"]

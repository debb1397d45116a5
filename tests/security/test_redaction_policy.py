"""Sensitive data: refused arguments, redacted events, and tool results the model never sees in full."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine import Engine
from engine.providers.base import ModelResponse, ToolCall
from engine.providers.registry import register_provider
from engine.runtime.agent import AgentLimits
from engine.safety.redaction import REDACTED

TOOLS = """
tools:
  login:
    description: Check credentials and return a session.
    parameters: {type: object, properties: {user: {type: string}, password: {type: string}}, required: [user]}
    workflow: login
"""
SKILLS = """
skills:
  session:
    kind: python
    function: creds:session
    input: {type: object, properties: {user: {type: string}, password: {type: string}}, required: [user]}
"""
WORKFLOWS = """
workflows:
  login:
    steps:
      - {id: s, skill: session, input: {user: $toolArgs.user, password: $toolArgs.password}}
"""
MODULE = '''
def session(input):
    return {"user": input["user"], "access_token": "tok-" + input["user"] + "-0123456789", "ok": True}
'''


def project(root: Path, engine_yaml: str = "") -> Path:
    (root / "tools.yaml").write_text(TOOLS)
    (root / "skills.yaml").write_text(SKILLS)
    (root / "workflows.yaml").write_text(WORKFLOWS)
    (root / "creds.py").write_text(MODULE)
    (root / "config").mkdir()
    (root / "config" / "models.yaml").write_text("default: agent\nmodels:\n  agent: {provider: redaction-probe}\n")
    (root / "config" / "engine.yaml").write_text(engine_yaml)
    return root


class _Probe:
    """Calls `login` once, then answers; remembers what it was shown."""

    seen: list[str] = []

    async def request(self, request, on_text=None):  # type: ignore[no-untyped-def]
        _Probe.seen = [m.content for m in request.messages]
        if not any(m.role == "tool" for m in request.messages):
            return ModelResponse("", tool_calls=(ToolCall("c1", "login", '{"user": "bob", "password": "hunter2-secret"}'),))
        return ModelResponse("done")


register_provider("redaction-probe", lambda spec: _Probe())


def test_refuse_policy_names_the_sensitive_fields(tmp_path: Path) -> None:
    engine = Engine.from_dir(project(tmp_path, "redaction:\n  arguments: refuse\n"))
    result = engine.call_tool_sync("login", {"user": "bob", "password": "hunter2-secret"})
    assert not result.ok and result.error.code == "sensitive_arguments"
    assert result.error.details["fields"] == ["/password"]
    assert engine.call_tool_sync("login", {"user": "bob"}).ok


def test_pass_policy_runs_but_listeners_never_see_the_values(tmp_path: Path) -> None:
    engine = Engine.from_dir(project(tmp_path))
    events = []
    result = engine.call_tool_sync("login", {"user": "bob", "password": "hunter2-secret"}, on_event=events.append)
    assert result.ok and result.data["access_token"].startswith("tok-bob")  # the caller gets the real data
    text = repr([e.to_dict() for e in events])
    assert "hunter2-secret" not in text and "tok-bob-0123456789" not in text and REDACTED in text


def test_the_model_reads_redacted_tool_results(tmp_path: Path) -> None:
    agent = Engine.from_dir(project(tmp_path)).agent(limits=AgentLimits(max_steps=3))
    outcome = asyncio.run(agent.run("log bob in"))
    assert outcome.stop_reason == "answer"
    observation = _Probe.seen[-1]
    assert "tok-bob-0123456789" not in observation and REDACTED in observation


def test_token_counts_are_not_credentials() -> None:
    """`token_budget` names a quantity of model tokens: shown; `access_token`, `token` stay hidden."""
    from engine.safety.redaction import Redactor

    redactor = Redactor()
    assert not redactor.is_sensitive("token_budget") and not redactor.is_sensitive("tokenBudget")
    assert not redactor.is_sensitive("input_tokens")
    assert redactor.is_sensitive("token") and redactor.is_sensitive("access_token") and redactor.is_sensitive("token_secret")


def test_the_punctuation_beside_a_sensitive_word_never_changes_the_verdict() -> None:
    """Any run of characters that are not letters or digits separates words: `auth:token` is as
    sensitive as `auth_token`, and a value under it is hidden by its key name."""
    from engine.safety.redaction import Redactor

    redactor = Redactor()
    for key in ("auth:token", "user/password", "password]", "${env:X_TOKEN}", "[password]", "db.password",
                "x-api-key", "api__key", "auth::token", "a/b:c[token]", "user@password", "Bearer+Token"):
        assert redactor.is_sensitive(key), key
    for key in ("token_budget]", "[tokenBudget]", "input:tokens", "key/words", "author", "${env:HOME}"):
        assert not redactor.is_sensitive(key), key
    assert redactor.redact({"auth:token": "tok-0123456789", "note": {"user/password": "hunter2"}}) == {
        "auth:token": REDACTED, "note": {"user/password": REDACTED}}

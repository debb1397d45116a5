"""Issue 10, secrets item 2: every event type is redacted, by one code path, before any listener.

Text deltas (`model_text_delta`, `final_answer_delta`) and `tool_progress_delta` used to
skip redaction. Known secret values of a run (values seen under sensitive keys, configured
keys) are replaced inside free text too, even when a model streams one split across pieces.
Sinks grepped: the events a listener gets, the store (database and WAL), `runs export`, and
the SSE stream and log of a real `skillyard serve` process.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from engine import Engine
from engine.safety.redaction import REDACTED, Redactor
from secrets_support import LOGIN_TOOL, leaks, plant, sink_files, skillyard, write


def scripted_project(root: Path, secret: str, *, api_key: str | None = None) -> Path:
    """A model that passes `secret` to the tool as api_token, then echoes it (and a key) as text."""
    echo = f"Your token is {secret}, keep it safe." + (f" The model key is {api_key}." if api_key else "")
    script = {"turns": [
        {"text": "Checking.", "tool_calls": [{"id": "c1", "name": "report", "arguments": {"api_token": secret}}]},
        {"text": echo},
    ]}
    model: dict[str, Any] = {"provider": "scripted", "options": {"script": "script.yaml"}}
    if api_key:
        model["api_key"] = "${SECRETS_TEST_MODEL_KEY}"
    files = {**LOGIN_TOOL, "script.yaml": json.dumps(script), "config/models.yaml": json.dumps({"default": "twin", "models": {"twin": model}})}
    files["leaky.py"] = files["leaky.py"].replace("def report(note: str,", "def report(api_token: str,").replace("{note}", "{api_token}").replace("=note", "=api_token")
    return write(root, files)


@pytest.mark.slow
def test_progress_deltas_and_model_echoes_are_redacted_in_events_and_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = plant("echo")
    key = plant("model-key")
    monkeypatch.setenv("SECRETS_TEST_MODEL_KEY", key)
    root = scripted_project(tmp_path / "project", secret, api_key=key)
    engine = Engine.from_dir(root, store=True)
    events: list[Any] = []
    outcome = asyncio.run(engine.agent().run("use my token", on_event=events.append))
    engine.close()
    assert outcome.stop_reason == "answer" and secret in outcome.answer  # the caller's own answer is whole
    records = [json.dumps(e.to_dict()) for e in events]
    assert {"tool_progress_delta", "model_text_delta", "final_answer_delta"} <= {e.type for e in events}
    deltas = "".join(e.data["text"] for e in events if e.type == "model_text_delta" and e.data["step"] == 2)
    assert deltas == f"Your token is {REDACTED}, keep it safe. The model key is {REDACTED}."  # split pieces, whole text
    progress = [e.data for e in events if e.type == "tool_progress_delta" and e.data.get("stage") == "auth"]
    assert progress == [{"stage": "auth", "message": f"using api_token={REDACTED}", "api_token": REDACTED, "detail": f"token is {REDACTED}"}]
    exported = skillyard("runs", "export", outcome.run_id, "--dir", str(root), cwd=root)
    assert exported.returncode == 0 and REDACTED in exported.stdout, exported.stderr
    files = sink_files(root)
    assert files
    assert leaks(secret, records, files) == [] and leaks(key, records, files) == []
    assert leaks(secret, [exported.stdout, exported.stderr]) == []


def test_a_secret_split_across_deltas_is_held_back_until_decided() -> None:
    scrubber = Redactor().for_run()
    scrubber({"password": "s3cret-value"})
    stream = scrubber.stream()
    pieces = [stream.push(p) for p in ["it is s3c", "ret-va", "lue, and s3", "x done"]]
    assert pieces == ["it is ", "", f"{REDACTED}, and ", "s3x done"] and stream.flush() == ""
    assert "".join(pieces).count(REDACTED) == 1


def test_configured_keys_are_known_secrets_from_the_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = plant("svc")
    monkeypatch.setenv("SKILLYARD_API_KEYS", f"admin:{key}")
    root = write(tmp_path / "project", LOGIN_TOOL)
    engine = Engine.from_dir(root)
    events: list[Any] = []
    engine.call_tool_sync("report", {"note": f"the key is {key}"}, on_event=events.append)
    assert leaks(key, [json.dumps(e.to_dict()) for e in events]) == []


@pytest.mark.slow
def test_sse_and_the_service_log_never_carry_the_echo(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    import httpx

    from server_helpers import parse_sse, running_server

    secret = plant("sse")
    root = scripted_project(tmp_path / "project", secret)
    key = plant("bearer")
    with running_server(root, keys=f"admin:{key}") as server:
        response = httpx.post(f"{server.url}/v1/agent", json={"messages": "use my token"}, timeout=30,
                              headers={"Authorization": f"Bearer {key}", "Accept": "text/event-stream"})
        assert response.status_code == 200
        frames = parse_sse(response.text)
    assert [f["event"] for f in frames][-1] == "agent_done"
    text = "".join(f["data"]["data"]["text"] for f in frames if f["event"] == "model_text_delta")
    assert REDACTED in text
    log = server.log.read_text()
    files = sink_files(root)
    assert files
    assert leaks(secret, [response.text, log], files) == [] and leaks(key, [response.text, log], files) == []

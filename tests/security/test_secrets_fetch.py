"""Issue 10, secrets items 3 and 4 (fetch): what a fetch shows never carries a secret.

- A fetched JSON `{"token": …}` (parseMode json) reaches the model redacted, as it reaches
  events and the store (the agent used to skip redaction for data that renders its own text).
- Secret query parameters (`?api_key=`, `?token=`, every sensitive key) are replaced in the
  URL as shown (events, the result's url / final_url, logs, the store); the request itself
  goes to the URL as given.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine import Engine
from engine.logging import configure_logging, logger
from engine.safety.redaction import REDACTED
from fetch_support import LoopbackServer, send, serving
from secrets_support import leaks, plant, sink_files, skillyard, write


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    yield from serving()


def fetch_project(root: Path, *, script: dict[str, Any] | None = None) -> Path:
    tool = {"type": "fetch", "description": "Read a JSON API.",
            "config": {"parseMode": "json", "allowPrivateNetworks": ["127.0.0.0/8"]}}
    files = {"tools.yaml": json.dumps({"tools": {"readApi": tool}})}
    if script is not None:
        files["script.yaml"] = json.dumps(script)
        files["config/models.yaml"] = json.dumps({"default": "twin", "models": {"twin": {"provider": "scripted", "options": {"script": "script.yaml"}}}})
    return write(root, files)


def test_a_fetched_token_reaches_the_model_redacted(tmp_path: Path, server: LoopbackServer) -> None:
    secret = plant("fetched")
    server.routes["/me"] = lambda h: send(h, 200, json.dumps({"user": "bob", "token": secret}).encode(), "application/json")
    url = f"http://127.0.0.1:{server.port}/me"
    script = {"turns": [{"tool_calls": [{"id": "c1", "name": "readApi", "arguments": {"url": url}}]}, {"text": "Done."}]}
    engine = Engine.from_dir(fetch_project(tmp_path / "project", script=script), store=True)
    events: list[Any] = []
    outcome = asyncio.run(engine.agent().run("who am I?", on_event=events.append))
    engine.close()
    assert outcome.stop_reason == "answer" and outcome.tool_results[0].data["content"]["token"] == secret  # the caller's data
    provider, _ = engine.project.provider("twin")
    observation = provider.requests[-1].messages[-1]  # type: ignore[attr-defined]
    assert observation.role == "tool" and '"user": "bob"' in observation.content and REDACTED in observation.content
    assert leaks(secret, [observation.content, *(json.dumps(e.to_dict()) for e in events)], sink_files(tmp_path)) == []


@pytest.mark.slow
def test_query_secrets_are_hidden_in_events_results_and_the_store(tmp_path: Path, server: LoopbackServer) -> None:
    key, token, hop = plant("api-key"), plant("token"), plant("hop")
    server.routes["/data"] = lambda h: send(h, 200, b'{"ok": true}', "application/json")
    server.routes["/jump"] = lambda h: send(h, 302, b"", "text/plain", Location=f"/data?access_token={hop}&page=2")
    root = fetch_project(tmp_path / "project")
    engine = Engine.from_dir(root, store=True)
    events: list[Any] = []
    url = f"http://127.0.0.1:{server.port}/jump?api_key={key}&q=1&token={token}"
    result = engine.call_tool_sync("readApi", {"url": url}, on_event=events.append)
    missing = engine.call_tool_sync("readApi", {"url": f"http://127.0.0.1:{server.port}/nope?apiKey={key}"}, on_event=events.append)
    engine.close()
    assert result.ok, result.error
    assert result.data["url"] == f"http://127.0.0.1:{server.port}/jump?api_key={REDACTED}&q=1&token={REDACTED}"
    assert result.data["final_url"].endswith(f"/data?access_token={REDACTED}&page=2")
    assert not missing.ok and missing.error.code == "http_error" and key not in missing.error.message
    assert any(key in seen.path for seen in server.seen) and any(hop in seen.path for seen in server.seen)  # requested as given
    records = [json.dumps(e.to_dict()) for e in events]
    assert any("/jump?api_key=[REDACTED]" in r for r in records if '"tool_call_start"' in r)
    exported = skillyard("runs", "export", events[0].run_id, "--dir", str(root), cwd=root)
    assert exported.returncode == 0, exported.stderr
    for secret in (key, token, hop):
        assert leaks(secret, [*records, result.model_text(), exported.stdout], sink_files(root)) == [], secret


def test_log_lines_hide_url_query_secrets(capsys: pytest.CaptureFixture[str]) -> None:
    secret = plant("log-url")
    configure_logging("json", "info")
    try:
        logger.error("fetch failed", url=f"https://api.example/v1?token={secret}&q=1", detail={"final_url": f"https://x/?api_key={secret}"})
    finally:
        configure_logging()
    captured = capsys.readouterr()
    assert captured.out == "" and "token=[REDACTED]&q=1" in captured.err and secret not in captured.err

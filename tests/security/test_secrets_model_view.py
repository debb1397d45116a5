"""Issue 28, security review item 5: what the model reads hides every secret the run knows.

A fetched JSON `{"password": P, "nested": {"api_key": K}, "note": "see P"}` reached the model
with `password` and `api_key` redacted but `"note": "see P"` verbatim, while the events, SSE
and the store showed `see [REDACTED]`: the model's text was redacted by key only. It now goes
through the run's own scrubber, the one the events use. Against a real HTTP server on
127.0.0.1, with a scripted model that records every request it is sent.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine import Engine
from engine.safety.redaction import REDACTED
from fetch_support import LoopbackServer, send, serving
from secrets_support import leaks, plant, sink_files, write


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    yield from serving()


def project(root: Path, url: str) -> Path:
    tool = {"type": "fetch", "description": "Read a JSON API.",
            "config": {"parseMode": "json", "allowPrivateNetworks": ["127.0.0.0/8"]}}  # loopback, for this test
    script = {"turns": [{"tool_calls": [{"id": "c1", "name": "readApi", "arguments": {"url": url}}]}, {"text": "Done."}]}
    return write(root, {
        "tools.yaml": json.dumps({"tools": {"readApi": tool}}),
        "script.yaml": json.dumps(script),
        "config/models.yaml": json.dumps({"default": "twin", "models": {"twin": {"provider": "scripted", "options": {"script": "script.yaml"}}}}),
    })


def test_a_secret_repeated_under_a_harmless_key_does_not_reach_the_model(tmp_path: Path, server: LoopbackServer) -> None:
    password, key = plant("password"), plant("api-key")
    page = {"password": password, "nested": {"api_key": key}, "note": f"see {password}", "items": [f"key={key}"]}
    server.routes["/account"] = lambda h: send(h, 200, json.dumps(page).encode(), "application/json")
    root = project(tmp_path / "project", server.url("/account"))
    engine = Engine.from_dir(root, store=True)
    events: list[Any] = []
    try:
        outcome = asyncio.run(engine.agent().run("what does my account say?", on_event=events.append))
    finally:
        engine.close()
    assert outcome.stop_reason == "answer" and outcome.tool_results[0].data["content"] == page  # the caller's data is whole
    provider, _ = engine.project.provider("twin")
    sent = provider.requests  # type: ignore[attr-defined]
    assert len(sent) == 2
    observation = sent[-1].messages[-1]
    assert observation.role == "tool" and f'"note": "see {REDACTED}"' in observation.content, observation.content
    assert f'"items": ["key={REDACTED}"]' in observation.content
    records = [json.dumps(event.to_dict()) for event in events]
    for secret in (password, key):
        assert leaks(secret, [repr(request) for request in sent]) == [], secret  # every message, every field
        assert leaks(secret, records, sink_files(root)) == [], secret

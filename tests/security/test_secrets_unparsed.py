"""Issue 28, security review item 3: argument text that is not accepted JSON never reaches a sink.

Such text has no keys for redaction to go by, so it used to be kept whole: the run's `input`
(runs.db and its WAL, `GET /v1/runs/{id}`, `skillyard runs export`) and the `tool_call_start`
event (SSE) carried a password the caller or the model wrote into it. It is now shown as
`[unparsed arguments: N chars]`, whatever its form: a missing brace, a string without its
closing quote, single quotes, a key spelled with an escape, a form body, or valid JSON refused
for a lone surrogate. Both doors are planted: the HTTP call route, and a model's tool call in
the agent loop; and a store fed such text by hand keeps none of it either.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine import Engine
from engine.cli.main import main
from engine.runtime.events import Event
from engine.server import create_app
from engine.store import open_store
from secrets_support import leaks, plant, sink_files, write
from server_helpers import parse_sse

SSE = {"Accept": "text/event-stream"}

# Argument texts, each holding the planted value P; none is accepted as JSON.
FORMS = {
    "missing_brace": '{"text": "x", "password": "P"',
    "open_string": '{"text": "x", "password": "P',
    "single_quotes": "{'text': 'x', 'password': 'P'}",
    "escaped_key": '{"text": "x", "pass\\u0077ord": "P",}',
    "escaped_quote": '{"text": "x", "password": "a\\"P',
    "form_body": "text=x&password=P",
    "lone_surrogate": '{"text": "\\ud800", "password": "P"}',  # valid JSON text, refused as no valid Unicode
}


def project(root: Path, script: dict[str, Any] | None = None) -> Path:
    files = {
        "tools.yaml": """
            tools:
              textReport:
                type: python
                description: Count the words of a text.
                config: {function: words:report}
        """,
        "words.py": """
            def report(text: str) -> dict:
                return {"words": len(text.split())}
        """,
    }
    if script is not None:
        files["script.yaml"] = json.dumps(script)
        files["config/models.yaml"] = json.dumps({"default": "twin", "models": {"twin": {"provider": "scripted", "options": {"script": "script.yaml"}}}})
    return write(root, files)


async def _call(app: Any, body: str) -> tuple[httpx.Response, httpx.Response, dict[str, Any]]:
    """The call answered as JSON, the same call streamed as SSE, and the stored run of the first."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        headers = {"Content-Type": "application/json"}
        answered = await client.post("/v1/tools/textReport/call", content=body, headers=headers)
        streamed = await client.post("/v1/tools/textReport/call", content=body, headers={**headers, **SSE})
        app.state.engine.store.flush()
        run = await client.get(f"/v1/runs/{answered.headers['x-run-id']}")
        return answered, streamed, run.json()


def exported(root: Path, run_id: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["runs", "export", run_id, "--dir", str(root)]) == 0
    out, err = capsys.readouterr()
    return out + err


@pytest.mark.parametrize("form", sorted(FORMS))
def test_an_unparsed_body_of_the_call_route_reaches_no_sink(form: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = plant("unparsed-http")
    body = FORMS[form].replace("P", secret)
    root = project(tmp_path / "project")
    engine = Engine.from_dir(root, store=True)
    try:
        app = create_app(engine, api_keys="", mcp=False)
        answered, streamed, run = asyncio.run(_call(app, body))
        files = sink_files(root)  # the database and its WAL while the engine still has them open
        held = [path.read_bytes() for path in files]
    finally:
        engine.close()
    assert answered.status_code == 422 and answered.json()["error"]["code"] == "invalid_arguments", answered.text
    frames = parse_sse(streamed.text)
    start = next(frame["data"] for frame in frames if frame["event"] == "tool_call_start")
    placeholder = f"[unparsed arguments: {len(body)} chars]"
    assert start["data"]["arguments"] == placeholder and run["input"] == placeholder, (start, run)
    assert any(path.name.endswith("-wal") for path in files), files
    export = exported(root, answered.headers["x-run-id"], capsys)
    assert placeholder in export
    assert leaks(secret, [answered.text, streamed.text, json.dumps(run), export, *held], sink_files(root)) == []


def test_unparsed_tool_arguments_of_a_model_reach_no_sink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = plant("unparsed-model")
    arguments = FORMS["missing_brace"].replace("P", secret)
    script = {"turns": [{"text": "Counting.", "tool_calls": [{"id": "c1", "name": "textReport", "arguments": arguments}]},
                        {"text": "I could not count it."}]}
    root = project(tmp_path / "project", script)
    engine = Engine.from_dir(root, store=True)
    events: list[Any] = []
    engine.subscribe(events.append)

    async def go() -> tuple[str, dict[str, Any]]:
        app = create_app(engine, api_keys="", mcp=False)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            streamed = await client.post("/v1/agent", json={"messages": "count my words"}, headers=SSE)
            assert streamed.status_code == 200, streamed.text
            engine.store.flush()
            run_id = parse_sse(streamed.text)[0]["data"]["run_id"]
            return streamed.text, (await client.get(f"/v1/runs/{run_id}")).json()

    try:
        sse, run = asyncio.run(go())
        files = sink_files(root)
        held = [path.read_bytes() for path in files]
    finally:
        engine.close()
    frames = parse_sse(sse)
    start = next(frame["data"] for frame in frames if frame["event"] == "tool_call_start")
    assert start["data"]["arguments"] == f"[unparsed arguments: {len(arguments)} chars]", start
    assert any(frame["event"] == "tool_call_error" and frame["data"]["data"]["error"]["code"] == "invalid_arguments" for frame in frames)
    assert frames[-1]["event"] == "agent_done" and frames[-1]["data"]["data"]["stop_reason"] == "answer"
    assert any(path.name.endswith("-wal") for path in files), files
    records = [json.dumps(event.to_dict()) for event in events]
    assert any('"tool_call_start"' in record for record in records)
    export = exported(root, run["id"], capsys)
    assert leaks(secret, [sse, json.dumps(run), export, *records, *held], sink_files(root)) == []


def test_a_store_fed_unparsed_argument_text_by_hand_keeps_none_of_it(tmp_path: Path) -> None:
    secret = plant("unparsed-store")
    text = FORMS["open_string"].replace("P", secret)
    placeholder = "[unparsed arguments: 12 chars]"  # what an engine already wrote stays as it is
    with open_store(tmp_path / "runs.db") as store:
        for run_id, arguments in (("run_raw", text), ("run_shown", placeholder), ("run_json", '{"password": "%s"}' % secret)):
            store.listener(Event("tool_call_start", run_id, 1, 1_001, "call_1", data={"tool": "t", "arguments": arguments}))
            store.listener(Event("tool_call_error", run_id, 2, 1_002, "call_1", data={"ok": False, "error": {"code": "invalid_arguments"}}))
        store.flush()
        runs = {run_id: store.run(run_id) for run_id in ("run_raw", "run_shown", "run_json")}
        held = [path.read_bytes() for path in sink_files(tmp_path)]
    assert runs["run_raw"].input == f"[unparsed arguments: {len(text)} chars]"
    assert runs["run_shown"].input == placeholder and runs["run_json"].input == {"password": "[REDACTED]"}
    assert leaks(secret, held, sink_files(tmp_path)) == []

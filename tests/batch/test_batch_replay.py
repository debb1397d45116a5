"""`skillyard batch --replay-from FILE` (issue 15): recorded answers for unchanged prompts, a
real (loopback, OpenAI-compatible) model only for the prompts that changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fake_llm_servers import FakeServer, OpenAIWire

pytestmark = pytest.mark.slow  # every test here starts a process or a server

WIRE = OpenAIWire()


def write_project(root: Path, url: str, prompt: str = "Describe in one line: {{ text }}") -> None:
    root.mkdir(exist_ok=True)
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "models.yaml").write_text(yaml.safe_dump({"default": "fake", "models": {"fake": WIRE.model_entry(url)}}))
    (root / "tools.yaml").write_text(yaml.safe_dump({"tools": {"describe": {
        "description": "Describe a text in one line.", "workflow": "describe",
        "parameters": {"type": "object", "properties": {"text": {"type": "string", "minLength": 1}}, "required": ["text"]}}}}))
    (root / "skills.yaml").write_text(yaml.safe_dump({"skills": {"describeText": {
        "kind": "prompt", "user": prompt,
        "input": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}}))
    (root / "workflows.yaml").write_text(yaml.safe_dump({"workflows": {"describe": {
        "steps": [{"id": "describe", "skill": "describeText", "input": {"text": "$toolArgs.text"}}],
        "output": "$steps.describe.output"}}}))


def batch(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "SKILLYARD_STORE_URL": ""}
    return subprocess.run([sys.executable, "-c", code, "batch", "describe", "--dir", str(root), "--concurrency", "1", *argv],
                          capture_output=True, text=True, timeout=60, cwd=root, env=env)


def outputs(path: Path) -> dict[str, object]:
    return {r["id"]: r["data"] for r in map(json.loads, path.read_text().splitlines())}


def test_only_changed_prompts_call_the_model(tmp_path):
    root = tmp_path / "p"
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{i}", "arguments": {"text": f"text number {i}"}}) + "\n" for i in range(3)))
    with FakeServer() as server:
        write_project(root, server.url)
        server.script(*(WIRE.reply(f"answer {i}") for i in range(3)))
        first = batch(root, "--data", str(cases), "--out", str(tmp_path / "before.jsonl"))
        assert first.returncode == 0, first.stderr
        assert len(server.requests) == 3
        before = outputs(tmp_path / "before.jsonl")
        assert sorted(before.values()) == ["answer 0", "answer 1", "answer 2"]

        server.reset()  # nothing changed: every answer comes from the recording, no request at all
        same = batch(root, "--data", str(cases), "--out", str(tmp_path / "same.jsonl"), "--replay-from", str(tmp_path / "before.jsonl"))
        assert same.returncode == 0, same.stderr
        assert server.requests == [] and outputs(tmp_path / "same.jsonl") == before
        assert "model answers 3 reused from" in same.stderr and "· 0 asked" in same.stderr

        server.reset()  # one case's prompt changed: only that one asks the model
        cases.write_text(cases.read_text().replace("text number 1", "a different text"))
        server.script(WIRE.reply("a new answer"))
        edited = batch(root, "--data", str(cases), "--out", str(tmp_path / "edited.jsonl"), "--replay-from", str(tmp_path / "before.jsonl"))
        assert edited.returncode == 0, edited.stderr
        assert len(server.requests) == 1 and "a different text" in json.dumps(server.requests[0].body)
        after = outputs(tmp_path / "edited.jsonl")
        assert after == {**before, "c1": "a new answer"}
        assert "model answers 2 reused" in edited.stderr and "· 1 asked" in edited.stderr

        server.reset()  # a prompt edit: every prompt changed, every case asks
        write_project(root, server.url, prompt="In one sentence, describe: {{ text }}")
        server.script(*(WIRE.reply(f"edited {i}") for i in range(3)))
        prompt_edit = batch(root, "--data", str(cases), "--out", str(tmp_path / "prompt.jsonl"), "--replay-from", str(tmp_path / "before.jsonl"))
        assert prompt_edit.returncode == 0 and len(server.requests) == 3 and "· 3 asked" in prompt_edit.stderr


def test_replay_from_needs_the_store_and_a_results_file(tmp_path):
    root = tmp_path / "p"
    with FakeServer() as server:
        write_project(root, server.url)
        cases = tmp_path / "c.jsonl"
        cases.write_text('{"text": "a"}\n')
        (tmp_path / "empty.jsonl").write_text("")
        no_store = batch(root, "--data", str(cases), "--no-store", "--replay-from", str(tmp_path / "empty.jsonl"))
        assert no_store.returncode == 2 and "run without --no-store" in no_store.stderr
        empty = batch(root, "--data", str(cases), "--replay-from", str(tmp_path / "empty.jsonl"))
        assert empty.returncode == 2 and "no results with a run_id" in empty.stderr
        assert server.requests == []

"""Batches in the run store (issue 15): both backends, `skillyard runs --batch`, `/v1/batches`."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from engine import Engine
from engine.link.linker import load_project
from server_helpers import running_server

pytestmark = pytest.mark.slow  # every test here starts a process or a server

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "batch"


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store/runs.db"
    return str(request.getfixturevalue("pg_url"))


def test_a_batch_its_cases_and_its_runs_on_both_backends(url, request):
    engine = Engine.from_project(load_project(PROJECT), store=url)
    try:
        results = [asyncio.run(engine.call_tool("measure", {"text": text})) for text in ("a b", "boom", "c")]
        store = engine.store
        batch_id = f"batch_{request.node.callspec.id}"
        store.start_batch(batch_id, "measure", 3, data_file="cases.jsonl")
        held = [{"check": "equals", "path": "/words", "ok": True, "message": "equal"}]
        failed = [{"check": "error", "ok": False, "message": "failed with execution_error, expected invalid_arguments"}]
        store.record_batch_cases(batch_id, [("1", results[0].run_id, True, True, held), ("2", results[1].run_id, False, True, [])])
        store.record_batch_cases(batch_id, [("2", results[1].run_id, False, False, failed), ("3", results[2].run_id, True, True, [])])
        store.finish_batch(batch_id, "done")
        store.start_batch("batch_other", "measure", 1, principal="alice")
        store.flush()
        every = {b["id"]: b for b in store.batches()}
        listed, other = every[batch_id], every["batch_other"]
        assert (listed["status"], listed["total"], listed["ran"], listed["ok"], listed["passed"]) == ("done", 3, 3, 2, 2)
        assert listed["pass_rate"] == pytest.approx(2 / 3, abs=1e-4) and listed["finished_at"] >= listed["started_at"]
        assert other["status"] == "running" and other["pass_rate"] is None
        assert [b["id"] for b in store.batches(principal="alice")] == ["batch_other"]
        one = store.batch(batch_id)
        assert [(c["id"], c["run_id"], c["ok"], c["passed"]) for c in one["cases"]] == [
            ("1", results[0].run_id, True, True), ("2", results[1].run_id, False, False), ("3", results[2].run_id, True, True)]
        assert [c["expect"] for c in one["cases"]] == [held, failed, []]  # the upsert replaced case 2's verdicts
        assert store.batch("batch_none") is None
        assert sorted(r.id for r in store.runs(batch=batch_id)) == sorted(r.run_id for r in results)
        assert store.runs(batch="batch_none") == []
    finally:
        engine.close()


def batch_cli(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv, "--dir", str(root)], capture_output=True, text=True,
                          timeout=60, cwd=root, env={**os.environ, "SKILLYARD_STORE_URL": ""})


def test_cli_batch_is_recorded_listed_by_runs_and_served_over_http(tmp_path):
    root = tmp_path / "p"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__", ".skillyard"))
    data = root / "cases.jsonl"
    data.write_text("".join(json.dumps({"id": f"c{i}", "arguments": {"text": "boom" if i == 2 else f"t {i}"}}) + "\n" for i in range(4)))
    out = tmp_path / "r.jsonl"
    done = batch_cli(root, "batch", "measure", "--data", str(data), "--out", str(out), "--limit", "3")
    assert done.returncode == 1, done.stderr  # c2 fails
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    batch_id = lines[0]["batch_id"]
    assert batch_id.startswith("batch_") and {line["batch_id"] for line in lines} == {batch_id}
    assert f"`skillyard runs --batch {batch_id}`" in done.stderr
    resumed = batch_cli(root, "batch", "measure", "--data", str(data), "--resume", str(out))
    assert resumed.returncode == 1 and json.loads(out.read_text().splitlines()[-1])["batch_id"] == batch_id  # same batch
    listed = batch_cli(root, "runs", "--batch", batch_id, "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(run["id"] for run in json.loads(listed.stdout)) == sorted(line["run_id"] for line in json.loads(
        "[" + ",".join(out.read_text().splitlines()) + "]"))
    with running_server(root, keys=None) as server:
        batches = httpx.get(f"{server.url}/v1/batches").json()
        assert [(b["id"], b["tool"], b["status"], b["total"], b["ran"], b["ok"]) for b in batches] == [
            (batch_id, "measure", "done", 4, 4, 3)]
        one = httpx.get(f"{server.url}/v1/batches/{batch_id}").json()
        assert [c["id"] for c in one["cases"]] == ["c0", "c1", "c2", "c3"] and not one["cases"][2]["ok"]
        run = httpx.get(f"{server.url}/v1/runs/{one['cases'][0]['run_id']}").json()
        assert run["name"] == "measure"
        missing = httpx.get(f"{server.url}/v1/batches/batch_nope")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


SECRET = "hunter2-planted-7f3a9c"


def test_case_verdicts_are_stored_and_never_quote_a_secret(tmp_path):
    """A verdict quotes the output ("got …"): under a sensitive key that value must stay hidden in
    results.jsonl, the store (and its WAL), the CLI's output and GET /v1/batches/{id}."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "sign.py").write_text(f"def sign(input):\n    return {{'user': input['user'], 'password': {SECRET!r}}}\n")
    (root / "skills.yaml").write_text(
        "skills:\n  sign:\n    kind: python\n    function: sign:sign\n"
        "    input: {type: object, properties: {user: {type: string}}, required: [user]}\n"
        "    output: {type: object, properties: {user: {type: string}, password: {type: string}}, required: [user, password]}\n")
    (root / "workflows.yaml").write_text(
        "workflows:\n  sign:\n    steps:\n      - {id: sign, skill: sign, input: {user: $toolArgs.user}}\n    output: $steps.sign.output\n")
    (root / "tools.yaml").write_text(
        "tools:\n  sign:\n    description: Sign a user in.\n    workflow: sign\n"
        "    parameters: {type: object, properties: {user: {type: string}}, required: [user], additionalProperties: false}\n")
    data = root / "cases.jsonl"
    data.write_text(json.dumps({"id": "a", "arguments": {"user": "ann"},
                                "expect": [{"path": "/password", "equals": "wrong"}, {"path": "/user", "equals": "ann"}]}) + "\n")
    out = tmp_path / "r.jsonl"
    done = batch_cli(root, "batch", "sign", "--data", str(data), "--out", str(out))
    assert done.returncode == 1, done.stderr  # the first expectation fails
    line = json.loads(out.read_text())
    assert [v["ok"] for v in line["expect"]] == [False, True] and "[REDACTED]" in line["expect"][0]["message"]
    with running_server(root, keys=None) as server:
        one = httpx.get(f"{server.url}/v1/batches/{line['batch_id']}").text
        assert '"check":"equals"' in one.replace(" ", "") and "[REDACTED]" in one
    sinks = [done.stdout, done.stderr, out.read_text(), one]
    sinks += [p.read_bytes().decode("utf-8", "replace") for p in (root / ".skillyard").glob("runs.db*")]
    assert len(sinks) >= 5 and not [s for s in sinks if SECRET in s]

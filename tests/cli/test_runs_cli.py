"""`skillyard runs …`, `skillyard logs` and the store's errors, end to end as subprocesses.

Runs are recorded in-process into the project's default store (.skillyard/runs.db) to keep
the test fast, plus one through `run-workflow`; every command under test is a real
subprocess. Independent commands run at the same time.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from engine import Engine
from engine.store import RunStore
from store_support import DEAD_MODELS, make_read_only, query, run_many, write_project

pytestmark = pytest.mark.slow  # every test here starts a process or a server


@pytest.fixture
def recorded(tmp_path: Path) -> dict:
    project = write_project(tmp_path / "project")
    engine = Engine.from_dir(project, store=True)
    runs = {
        "report1": engine.call_tool_sync("report", {"text": "one two three"}),
        "plan": engine.call_tool_sync("plan", {"topic": "caching"}),
        "boom": engine.call_tool_sync("boom", {"message": "kaput"}),
        "report2": engine.call_tool_sync("report", {"text": "four five"}),
        "report3": engine.call_tool_sync("report", {"text": "six"}),
        "old": engine.call_tool_sync("report", {"text": "ancient words"}),
    }
    engine.close()
    db = project / ".skillyard" / "runs.db"
    connection = sqlite3.connect(db)  # one run from 40 days ago, for --since and prune
    connection.execute("UPDATE runs SET started_at = started_at - ? WHERE id = ?", (40 * 86_400_000, runs["old"].run_id))
    connection.commit()
    connection.close()
    return {"project": project, "db": db, "runs": {name: result.run_id for name, result in runs.items()}}


def test_runs_show_export_logs_replay_and_prune(recorded: dict) -> None:
    project, db, ids = recorded["project"], recorded["db"], recorded["runs"]
    where = ["--dir", str(project)]
    # From now on the project's only model fails if anything calls it: replay must not.
    (project / "config" / "models.yaml").write_text(DEAD_MODELS)
    plan_prefix = ids["plan"][:20]  # its time and a few random digits
    listing, filtered, show, export, logs, replay = run_many([
        ["skillyard", "runs", *where],
        ["skillyard", "runs", *where, "--tool", "report", "--status", "ok", "--since", "1h", "--limit", "2"],
        ["skillyard", "runs", "show", plan_prefix, "--events", *where],
        ["skillyard", "runs", "export", ids["boom"], *where],
        ["skillyard", "logs", *where, "--tool", "boom", "--status", "error"],
        ["skillyard", "runs", *where, "replay", ids["plan"], "--quiet"],  # --dir before the action works too
    ])

    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [ids[n] for n in ("report3", "report2", "boom", "plan", "report1", "old")]
    assert " error: execution_error " in lines[2] and all(" ok " in line for i, line in enumerate(lines) if i != 2)

    assert filtered.returncode == 0, filtered.stderr
    assert [line.split()[0] for line in filtered.stdout.splitlines()] == [ids["report3"], ids["report2"]]

    assert show.returncode == 0, show.stderr
    text = show.stdout
    assert text.startswith(f"{ids['plan']}  tool plan  ok ")
    assert "├─ tool plan" in text and "step outline → outline [prompt]" in text
    assert "input:  {\"topic\": \"caching\"}" in text and "output: {\"title\"" in text
    assert " in / " in text and "out tokens" in text and "✓ ok in " in text
    assert "usage: " in text and " input + " in text
    assert "events:" in text and "tool_call_start" in text and "model_exchange" in text

    assert export.returncode == 0, export.stderr
    events = [json.loads(line) for line in export.stdout.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert {e["run_id"] for e in events} == {ids["boom"]}
    assert events[0]["type"] == "tool_call_start" and events[-1]["type"] == "tool_call_error"
    assert events[-1]["data"]["error"]["code"] == "execution_error"

    assert logs.returncode == 0, logs.stderr
    (line,) = logs.stdout.splitlines()
    assert "boom" in line and "error" in line and ids["boom"] in line and "kaput" in line

    assert replay.returncode == 0, replay.stderr
    assert json.loads(replay.stdout) == json.loads(query(db, "SELECT output FROM runs WHERE id = ?", (ids["plan"],))[0][0])
    assert "same output as the recording" in replay.stderr and "no model called" in replay.stderr

    # A prompt changed since the recording: reported as a diff, exit 1. Meanwhile: prune, and
    # one more run recorded through run-workflow itself.
    skills = project / "skills.yaml"
    skills.write_text(skills.read_text().replace("Write a short plan about", "Write a long plan about"))
    (project / "config" / "models.yaml").write_text("default: mock\nmodels:\n  mock: {provider: mock}\n")
    changed, prune, recorded_by_cli = run_many([
        ["skillyard", "runs", "replay", ids["plan"], *where, "--quiet"],
        ["skillyard", "runs", "prune", "--older-than", "30d", *where],
        ["run-workflow", "report", "--arg", "text=from the command line", "--quiet", *where],
    ])
    assert changed.returncode == 1, changed.stderr
    assert "step 'outline': the prompt changed since the recording; no model was called" in changed.stderr
    assert "-Write a short plan about caching." in changed.stderr and "+Write a long plan about caching." in changed.stderr
    assert "Traceback" not in changed.stderr

    assert prune.returncode == 0, prune.stderr
    assert prune.stdout.strip() == "deleted 1 run(s) older than 30d"
    assert recorded_by_cli.returncode == 0, recorded_by_cli.stderr
    assert json.loads(recorded_by_cli.stdout)["words"] == 4

    with RunStore(db) as store:
        remaining = store.runs(limit=100)
        assert ids["old"] not in {r.id for r in remaining}
        assert query(db, "SELECT COUNT(*) FROM events WHERE run_id = ?", (ids["old"],)) == [(0,)]
        newest = remaining[0]
        assert newest.name == "report" and newest.status == "ok" and newest.input == {"text": "from the command line"}
        assert newest.finished_at is not None and newest.id not in ids.values()


def test_store_errors_are_one_clear_message_and_no_store_still_runs(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    corrupt = write_project(tmp_path / "corrupt")
    (corrupt / ".skillyard").mkdir()
    (corrupt / ".skillyard" / "runs.db").write_bytes(b"garbage, not sqlite " * 400)
    read_only = write_project(tmp_path / "readonly")
    (read_only / "config" / "engine.yaml").write_text("store:\n  path: locked/runs.db\n")
    make_read_only(read_only / "locked", request)
    before = time.time()

    runs_on_corrupt, call_on_corrupt, no_store, call_on_read_only = run_many([
        ["skillyard", "runs", "--dir", str(corrupt)],
        ["run-workflow", "report", "--arg", "text=a b", "--dir", str(corrupt)],
        ["run-workflow", "report", "--arg", "text=a b", "--dir", str(corrupt), "--no-store", "--quiet"],
        ["run-workflow", "report", "--arg", "text=a b", "--dir", str(read_only)],
    ])
    for done, path in ((runs_on_corrupt, corrupt / ".skillyard" / "runs.db"),
                       (call_on_corrupt, corrupt / ".skillyard" / "runs.db"),
                       (call_on_read_only, read_only / "locked" / "runs.db")):
        assert done.returncode == 2, (done.args, done.stderr)
        assert done.stderr.startswith(f"error: cannot open the run store {path}"), done.stderr
        assert "--no-store" in done.stderr and "Traceback" not in done.stderr
        assert done.stdout == ""
    assert no_store.returncode == 0, no_store.stderr
    assert json.loads(no_store.stdout)["words"] == 2
    assert (corrupt / ".skillyard" / "runs.db").read_bytes().startswith(b"garbage"), "the bad file is left alone"
    assert time.time() - before < 60

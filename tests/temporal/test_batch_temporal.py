"""`skillyard batch --backend temporal` (issue 15): each case a Temporal execution run by a real
worker, recorded in the shared PostgreSQL store, with the same results file as a local batch."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from temporal_server import temporal_address  # noqa: F401 - the session's dev server (a fixture)
from test_temporal import Setup, setup, workflow_status  # noqa: F401 - fixtures

CASES = [
    {"id": "a", "arguments": {"text": "alpha"}, "expect": {"path": "/shout", "equals": "ALPHA!"}},
    {"id": "b", "arguments": {"text": "beta", "seconds": 0.2}, "expect": {"path": "/slept", "equals": "beta"}},
    {"id": "c", "arguments": {"text": "gamma"}, "expect": {"path": "/shout", "equals": "wrong"}},
    {"id": "d", "arguments": {"text": ""}, "expect": {"error": "invalid_arguments"}},  # refused before any execution
]


@pytest.mark.slow
def test_a_batch_runs_each_case_on_a_worker_and_records_it_in_the_shared_store(setup: Setup) -> None:  # noqa: F811
    setup.start_worker()
    data = setup.root / "cases.jsonl"  # data and results beside the project, written after the worker started

    data.write_text("".join(json.dumps(case) + "\n" for case in CASES))
    out = setup.root / "results.jsonl"
    done = subprocess.run([*setup.command("batch", "slowPipeline", "--data", str(data), "--out", str(out),
                                          "--concurrency", "3"), "--backend", "temporal"],
                          env=setup.env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 1, done.stderr  # case c's expectation fails
    results = {line["id"]: line for line in map(json.loads, out.read_text().splitlines())}
    assert {k: (r["ok"], r["passed"]) for k, r in results.items()} == {
        "a": (True, True), "b": (True, True), "c": (True, False), "d": (False, True)}
    assert results["a"]["data"] == {"shout": "ALPHA!", "slept": "alpha"}
    for case in "abc":  # a Temporal execution each (workflow id = run id), its steps run by the worker
        assert workflow_status(setup.address, results[case]["run_id"]) == "COMPLETED"
    assert workflow_status(setup.address, results["d"]["run_id"]) is None  # the router refused it: nothing started
    worker_pid = setup.workers[0].pid
    assert setup.counted("count", "alpha") == [worker_pid] and setup.counted("sleep", "gamma") == [worker_pid]
    assert os.getpid() != worker_pid
    batch_id = results["a"]["batch_id"]
    listed = subprocess.run([*setup.command("runs", "--batch", batch_id, "--json")], env=setup.env,
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert sorted(run["id"] for run in json.loads(listed.stdout)) == sorted(r["run_id"] for r in results.values())
    assert "cases 4" in done.stderr or "4 cases" in done.stderr, done.stderr


def test_the_revision_covers_the_project_s_files_not_the_data_beside_them(tmp_path) -> None:
    import shutil
    from pathlib import Path

    from engine.backends.temporal.revision import project_revision
    from engine.link.linker import load_project

    root = tmp_path / "p"
    shutil.copytree(Path(__file__).resolve().parents[1] / "projects" / "temporal", root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "config").mkdir()
    (root / "config" / "models.yaml").write_text("models:\n  demo:\n    provider: scripted\n    options: {script: demo.yaml}\n")
    (root / "demo.yaml").write_text("turns: []\n")

    def revision() -> str:
        return project_revision(load_project(root))

    first = revision()
    for name, text in (("cases.jsonl", "{}\n"), ("cases.yaml", "- {text: a}\n"), ("results.jsonl", "{}\n"), ("notes.txt", "x")):
        (root / name).write_text(text)
    assert revision() == first  # data beside the project
    for name, edit in (("workflows.yaml", "# edited\n"), ("temporal_skills.py", "# edited\n"), ("demo.yaml", "# edited\n")):
        before = revision()
        with open(root / name, "a") as out:
            out.write(edit)
        assert revision() != before, name

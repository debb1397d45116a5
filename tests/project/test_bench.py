"""`python -m bench --quick` runs end to end and prints every section.

No timing assertions here: the performance targets are judged by the benchmark itself
(`python -m bench`, see docs/performance.md), not by unit tests on a shared machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process or a server

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_runs_and_prints_every_section(tmp_path: Path) -> None:
    out_file = tmp_path / "bench.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--json", str(out_file)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    for heading in ("(a) Per-call time", "(b) 1,000 concurrent calls", "(c) Load + link", "(d) LangGraph", "Summary"):
        assert heading in text, f"missing section {heading!r}:\n{text}"
    for label in ("3-step call, median", "per added step", "wall", "peak RSS", "load + link"):
        assert label in text
    assert "n/a (quick)" in text  # quick mode reports figures but does not judge them

    figures = json.loads(out_file.read_text())
    a = figures["a"]
    assert a["events_ok"], "the on_event listener missed events"
    assert set(a["engine_us"]) == {"3", "10", "50"}
    assert all(value > 0 for value in a["engine_us"].values())
    assert figures["b"]["engine"]["calls"] == 1000 and figures["b"]["engine"]["peak_rss_mib"] > 0
    assert "100 tools" in figures["c"]["summary"]


def test_store_and_agent_benchmarks_run_quick() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for module, expected in (("bench.store", "the store adds"), ("bench.agent", "engine overhead per iteration")):
        proc = subprocess.run([sys.executable, "-m", module, "--quick"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert expected in proc.stdout and "n/a (quick)" in proc.stdout, proc.stdout


def test_the_bytecode_count_of_a_call_is_the_same_twice() -> None:
    """bench.opcodes is the figure two commits compare by: it must not move between runs."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    lines = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "bench.opcodes", "--calls", "3", "--top", "3"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines.append(proc.stdout.splitlines())
    assert lines[0][0] == lines[1][0] and "bytecodes per call" in lines[0][0], lines
    assert "engine/runs/run.py:emit" in "\n".join(lines[0])


def test_agentloop_bench_runs_the_skillyard_case(tmp_path: Path) -> None:
    """`python -m bench.agentloop` end to end at tiny sizes, skillyard alone (the peers are the
    `bench` extra's, and each is skipped, saying so, when it is not installed)."""
    out_file = tmp_path / "agentloop.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "bench.agentloop", "bench", "--frameworks", "skillyard", "--rounds", "1", "--runs", "2",
         "--warmup", "1", "--concurrency", "4", "--batches", "1", "--out", str(out_file)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for scenario in ("k1", "k4", "seq5"):
        assert f"skillyard {scenario}: CPU ms/run median" in proc.stdout, proc.stdout
    [round_] = json.loads(out_file.read_text())["rounds"]
    assert round_["skillyard"]["server"]["non_stream"] > 0 and round_["skillyard"]["server"]["stream"] == 0  # nobody watched
def test_the_startup_benchmark_compares_two_trees(tmp_path: Path) -> None:
    """Against itself (one round): every figure printed and written, the ratios about 1."""
    out_file = tmp_path / "startup.json"
    proc = subprocess.run([sys.executable, "-m", "bench.startup", str(ROOT), "--rounds", "1", "--json", str(out_file)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("import engine, time", "from engine import Engine", "run-workflow textReport --no-store, wall",
                  "peak RSS", "run-workflow --help", "skillyard --help"):
        assert label in proc.stdout
    figures = json.loads(out_file.read_text())
    assert figures["best"]["this"]["import_modules"] == figures["best"]["baseline"]["import_modules"]

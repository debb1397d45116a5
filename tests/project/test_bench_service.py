"""`python -m bench.service` runs end to end (servers started, loaded, stopped) and prints its ratios.

No timing assertion: the throughput targets are judged by the benchmark on a quiet machine
(docs/operations.md, "Throughput"), not by a unit test on a shared one. The load comes from the
bench's own asyncio client, as in CI (wrk is not needed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process or a server

pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parents[2]


def test_the_service_bench_runs_and_prints_ratios_to_the_empty_app(tmp_path: Path) -> None:
    out_file = tmp_path / "service.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-m", "bench.service", "--rounds", "1", "--seconds", "1", "--stores", "none",
         "--client", "python", "--ttfe-calls", "200", "--json", str(out_file)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    text = proc.stdout
    assert "÷ empty" in text and "time to first SSE event" in text
    figures = json.loads(out_file.read_text())
    assert figures["client"] == "python" and figures["errors"] == 0
    rows = {(r["server"], r["connections"], r["sse"]): r for r in figures["rows"]}
    assert set(rows) == {(server, c, sse) for server in ("empty", "no-store") for c in (10, 100) for sse in (False, True)}
    for key, row in rows.items():
        assert row["rps"][0] > 0, key
        if key[0] == "no-store":
            assert len(row["ratio"]) == 1 and row["ratio"][0] > 0
            assert f"{row['ratio'][0]:.2f}" in text
        assert row["at_once"] == []  # loading two servers at once needs wrk: two asyncio clients share a core
    assert figures["ttfe"]["no-store"]["first_event_p99_ms"][0] > 0
    assert figures["ttfe"]["empty"]["ttfb_p99_ms"][0] > 0

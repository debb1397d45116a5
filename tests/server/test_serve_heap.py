"""`skillyard serve` sets the garbage collector for a long-running service (cli/serve.py, settle_heap).

Checked in a fresh interpreter (the setting is process-wide): the start-up heap is frozen and
the youngest generation is collected every SERVICE_GC_THRESHOLD allocations; the older
generations keep Python's ratios. The embedded app (create_app) leaves the collector alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process or a server

REPO = Path(__file__).resolve().parents[2]


def _in_fresh_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_serve_freezes_the_start_up_heap_and_collects_the_young_less_often() -> None:
    out = _in_fresh_python(
        "import gc\n"
        "from engine.cli.serve import SERVICE_GC_THRESHOLD, settle_heap\n"
        "before = gc.get_threshold()\n"
        "settle_heap()\n"
        "print(gc.get_threshold() == (SERVICE_GC_THRESHOLD, *before[1:]), gc.get_freeze_count() > 1000,"
        " SERVICE_GC_THRESHOLD > before[0])\n"
    )
    assert out == "True True True"


def test_the_embedded_app_leaves_the_collector_alone(tmp_path: Path) -> None:
    out = _in_fresh_python(
        "import gc\n"
        "before = gc.get_threshold()\n"
        "from engine import Engine\n"
        "from engine.server import create_app\n"
        f"create_app(Engine.from_dir({str(REPO)!r}))\n"
        "print(gc.get_threshold() == before, gc.get_freeze_count())\n"
    )
    assert out == "True 0"

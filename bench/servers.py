"""What the service benchmarks share: a throwaway copy of the shipped project, and a throwaway PostgreSQL."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PROJECT_PARTS = ("tools.yaml", "skills.yaml", "workflows.yaml", "config", "capabilities", "examples")


def copy_shipped_project(prefix: str) -> Path:
    """The shipped project's files in a new temp directory (its own store, nothing of the checkout's)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    for part in PROJECT_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, root / part, ignore=shutil.ignore_patterns("__pycache__", ".skillyard"))
        elif source.exists():
            shutil.copy2(source, root / part)
    return root


def throwaway_postgres(url: str | None, wanted: bool) -> tuple[str | None, Any]:
    """A PostgreSQL URL (given, or a new database in a throwaway cluster) and the cluster to stop, or (None, None)
    when PostgreSQL is not wanted or its binaries are not installed."""
    if url or not wanted:
        return url, None
    sys.path.insert(0, str(REPO / "tests"))
    try:
        from pg_cluster import PgCluster, find_bin
    except ImportError:
        return None, None
    bindir = find_bin()
    if bindir is None:
        return None, None
    cluster = PgCluster(bindir)
    cluster.start()
    cluster.wait_ready()
    return cluster.new_database(), cluster

"""The revision of a linked project: what a worker serves and what a front door asks for.

A hash of the project's files (YAML, Python modules, templates: every file under the project
directory but hidden directories, caches and the run store), so two processes agree on it
when, and only when, they load the same files. Computed once per load, never per call.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules"})
_SKIPPED_SUFFIXES = (".pyc", ".db", ".db-wal", ".db-shm", ".sqlite", ".log")
_MAX_FILE_BYTES = 16 << 20  # larger files (data, not code) are hashed by size only


def project_revision(root: Path) -> str:
    """`sha256:` and 16 hex digits over every project file's relative path and content."""
    digest = hashlib.sha256()
    root = Path(root).resolve()
    for path in sorted(_project_files(root)):
        relative = path.relative_to(root).as_posix()
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
        size = path.stat().st_size
        digest.update(path.read_bytes() if size <= _MAX_FILE_BYTES else f"size:{size}".encode())
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()[:16]


def _project_files(root: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS]
        found.extend(Path(folder) / name for name in files
                     if not name.startswith(".") and not name.endswith(_SKIPPED_SUFFIXES))
    return found

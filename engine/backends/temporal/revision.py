"""The revision of a linked project: what a worker serves and what a front door asks for.

A hash of the files the project is made of — the YAML its loader read, every Python module
under the project directory, and files its models' options name (a scripted model's script) —
so two processes agree on it when, and only when, they run the same project. Data next to
the project (a batch's cases and results, logs, the run store) is not part of it: writing a
results file must not make every worker refuse the next call. Computed once per load.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from ...runtime.project import Project

_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "venv", "site-packages"})


def project_revision(project: "Project") -> str:
    """`sha256:` and 16 hex digits over each project file's relative path and content."""
    root = Path(project.root).resolve()
    files = {(root / name).resolve() for name in project.files}
    files.update(_python_modules(root))
    files.update(_named_by_options(root, (spec.options for spec in project.models.values())))
    digest = hashlib.sha256()
    for path in sorted(files):
        if not path.is_file():
            continue
        digest.update(path.relative_to(root).as_posix().encode("utf-8", "surrogateescape") + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()[:16]


def _python_modules(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS]
        found.extend(Path(folder) / name for name in files if name.endswith(".py") and not name.startswith("."))
    return found


def _named_by_options(root: Path, options: Iterable[dict]) -> list[Path]:
    """Files under the project that a model's options name by a relative path."""
    found = []
    for option in options:
        for value in option.values():
            if isinstance(value, str) and value and not os.path.isabs(value):
                path = (root / value).resolve()
                if path.is_relative_to(root) and path.is_file():
                    found.append(path)
    return found

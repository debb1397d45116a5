"""`skillyard serve --reload`: relink the project when its files change.

A thread polls the project's files once a second (YAML anywhere in the project's top level and
config/, and the Python modules under the project directory) — no extra dependency, and it works
on every file system. On a change the engine relinks (`Engine.reload`): a tool broken by the
change keeps serving its last good version and is listed as broken; a project-wide problem
keeps the whole running project. Changed Python modules of the project are imported afresh.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Callable

from .._engine import Engine
from ..errors import ConfigError

POLL_S = 1.0
_SKIP_DIRS = {".git", ".skillyard", ".venv", "venv", "node_modules", "__pycache__"}

Snapshot = dict[Path, tuple[int, int]]


def snapshot(root: Path) -> Snapshot:
    """(mtime, size) of every file a relink reads."""
    found: Snapshot = {}
    candidates = [*root.glob("*.y*ml"), *(root / "config").glob("*.y*ml"), *_python_files(root)]
    for path in candidates:
        try:
            stat = path.stat()
        except OSError:
            continue
        found[path] = (stat.st_mtime_ns, stat.st_size)
    return found


def _python_files(root: Path) -> list[Path]:
    files = []
    for path in root.rglob("*.py"):
        if not _SKIP_DIRS.intersection(part for part in path.relative_to(root).parts[:-1]):
            files.append(path)
    return files


def forget_project_modules(root: Path) -> None:
    """Drop the project's own modules from sys.modules so the relink imports them afresh."""
    root = root.resolve()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(root) and ".venv" not in Path(file).parts:
            del sys.modules[name]


class ProjectWatcher:
    def __init__(self, engine: Engine, say: Callable[[str], None], interval: float = POLL_S):
        self.engine = engine
        self.say = say
        self.interval = interval
        self.root = Path(engine.project.root)
        self.seen = snapshot(self.root)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="skillyard-watch", daemon=True)

    def start(self) -> "ProjectWatcher":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            now = snapshot(self.root)
            if now != self.seen:
                changed = sorted(str(p.relative_to(self.root)) for p in now.keys() | self.seen.keys() if now.get(p) != self.seen.get(p))
                self.seen = now
                self.relink(changed)

    def relink(self, changed: list[str]) -> None:
        if any(name.endswith(".py") for name in changed):
            forget_project_modules(self.root)
        try:
            project = self.engine.reload()
        except ConfigError as exc:
            self.say(f"skillyard: {', '.join(changed)} changed; the project does not load, kept the running one:")
            for issue in exc.issues:
                self.say(f"  {issue}")
            return
        except Exception as exc:  # noqa: BLE001 - a watcher must outlive a bad edit
            self.say(f"skillyard: {', '.join(changed)} changed; reload failed ({type(exc).__name__}: {exc}), kept the running project")
            return
        self.say(f"skillyard: {', '.join(changed)} changed; reloaded: {project.summary()}")
        for name, issues in sorted(project.broken.items()):
            kept = " (serving its last good version)" if name in project.tools else ""
            self.say(f"  tool {name!r} is broken{kept}:")
            for issue in issues:
                self.say(f"    {issue}")

"""Shared by the test_secrets_* files: planted values, projects that leak them, and sink greps.

(No tests here; the name keeps it beside the tests that import it.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Iterable

BIN = Path(sys.executable).parent


def plant(label: str) -> str:
    """A value that cannot appear anywhere by chance."""
    return f"Hunter2-PLANTED-{label}-{uuid.uuid4().hex[:12]}"


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


LOGIN_TOOL = {
    "tools.yaml": """
        tools:
          login:
            type: python
            description: Log a user in (raises, quoting what it was given).
            config: {function: leaky:login}
          report:
            type: python
            description: Reports progress with a token in it.
            config: {function: leaky:report}
    """,
    "leaky.py": '''
        from engine.runtime.context import CallContext


        def login(user: str, password: str) -> dict:
            kept = {"user": user, "password": password}  # a local a traceback renderer could show
            raise RuntimeError(f"login failed for {user} with {password} ({len(kept)} fields)")


        def report(note: str, run: CallContext) -> dict:
            run.tool_progress("auth", f"using api_token={note}", api_token=note, detail=f"token is {note}")
            return {"ok": True}
    ''',
}


def sink_files(root: Path) -> list[Path]:
    """The run store's files (the database, its WAL and shared memory) under `root`."""
    return [p for p in root.rglob("*") if p.is_file() and (p.suffix == ".db" or p.name.endswith(("-wal", "-shm")))]


def leaks(secret: str, texts: Iterable[str | bytes], files: Iterable[Path] = ()) -> list[str]:
    """Where `secret` shows up: 'text #i' or a file path (empty when it shows up nowhere)."""
    found = []
    needle = secret.encode()
    for index, text in enumerate(texts):
        data = text.encode("utf-8", "replace") if isinstance(text, str) else text
        if needle in data:
            found.append(f"text #{index}")
    for path in files:
        if needle in path.read_bytes():
            found.append(str(path))
    return found


def skillyard(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The `skillyard` command as a user runs it (a real subprocess)."""
    script = BIN / "skillyard"
    command = [str(script)] if script.exists() else [sys.executable, "-c", "import sys; from engine.cli.main import main; sys.exit(main())"]
    return subprocess.run([*command, *args], cwd=cwd, env={**os.environ, **(env or {})}, input=stdin,
                          capture_output=True, text=True, timeout=120)


def python(code: str, *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """An embedding script, run in its own interpreter."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=120)


def run_id_of(text: str) -> str:
    """The run id the CLI's timeline prints (`▶ tool  (run_…)`)."""
    match = re.search(r"\b(run_[0-9a-f]+)\b", text)
    assert match, text
    return match.group(1)

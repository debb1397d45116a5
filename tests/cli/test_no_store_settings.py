"""`--no-store` (and `store.enabled: false`) means "do not record runs", not "forget what
`skillyard tools` decided" (issue 30 §5): a tool an admin disabled stays disabled for `call`,
`serve` and a reload, read from the store without writing to it."""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

from engine import Engine
from engine.cli.common import open_engine
from engine.cli.main import main
from test_validate_agrees import UNDECLARED, write

FILES = {**UNDECLARED, "skills.yaml": UNDECLARED["skills.yaml"].replace("{{ intro }}: ", "")}


def disabled_project(tmp_path: Path, capsys) -> Path:
    root = write(tmp_path / "p", FILES)
    assert main(["tools", "disable", "other", "--dir", str(root)]) == 0
    capsys.readouterr()
    return root


def runs_recorded(root: Path) -> int:
    with sqlite3.connect(root / ".skillyard" / "runs.db") as db:
        return db.execute("SELECT count(*) FROM runs").fetchone()[0]


def test_call_no_store_refuses_a_tool_disabled_in_the_store(tmp_path, capsys):
    root = disabled_project(tmp_path, capsys)
    assert main(["call", "other", "--dir", str(root), "--arg", "text=hi", "--no-store"]) == 2
    assert "disabled" in capsys.readouterr().err
    assert main(["call", "report", "--dir", str(root), "--arg", "text=hi", "--no-store", "--quiet"]) == 0
    assert runs_recorded(root) == 0  # read, never written


def test_store_enabled_false_still_applies_the_settings(tmp_path, capsys):
    root = disabled_project(tmp_path, capsys)
    (root / "config" / "engine.yaml").write_text("store:\n  enabled: false\n")
    assert main(["call", "other", "--dir", str(root), "--arg", "text=hi"]) == 2
    assert "disabled" in capsys.readouterr().err


def test_serve_no_store_keeps_what_the_admin_disabled_and_a_reload_reads_it_again(tmp_path, capsys):
    root = disabled_project(tmp_path, capsys)
    engine = open_engine(argparse.Namespace(dir=str(root), no_store=True, backend=None))  # what serve/mcp open
    assert engine.store is None and not engine.project.tools["other"].enabled
    assert not engine.reload().tools["other"].enabled
    assert main(["tools", "enable", "other", "--dir", str(root)]) == 0
    assert engine.reload().tools["other"].enabled  # changed meanwhile: the next reload sees it


def test_python_asks_for_the_stored_settings_explicitly(tmp_path, capsys):
    root = disabled_project(tmp_path, capsys)
    assert Engine.from_dir(root).project.tools["other"].enabled  # the YAML alone, as documented
    assert not Engine.from_dir(root, stored_settings=True).project.tools["other"].enabled


def test_no_store_help_says_settings_still_apply(capsys):
    for argv in (["call", "--help"], ["serve", "--help"], ["chat", "--help"], ["batch", "--help"], ["mcp", "--help"]):
        try:
            main(argv)
        except SystemExit:
            pass
        assert "by `skillyard tools` still apply" in " ".join(capsys.readouterr().out.split()), argv

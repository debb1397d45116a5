"""`skillyard chat --session NAME` and `skillyard sessions [show|delete]` (issue 31 §1), in
process through `main(argv)`, the model a loopback OpenAI server driven by the `openai` SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from engine.cli.main import main
from fake_llm_servers import WIRES, FakeServer, call, write_project

WIRE = WIRES["openai"]


@pytest.fixture(scope="module")
def model_server() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


@pytest.fixture
def root(tmp_path: Path, model_server: FakeServer) -> Path:
    model_server.reset()
    return write_project(tmp_path / "project", {"fake": WIRE.model_entry(model_server.url)})


def test_chat_continues_a_session_and_sessions_show_it(root: Path, model_server: FakeServer,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    model_server.script(WIRE.reply("", [call("c1", "echo", {"name": "Ada"})]), WIRE.reply("Hello Ada."), WIRE.reply("Again."))
    assert main(["chat", "--dir", str(root), "--quiet", "--session", "work", "greet Ada"]) == 0
    assert main(["chat", "--dir", str(root), "--quiet", "--session", "work", "once more"]) == 0
    out = capsys.readouterr().out
    assert "Hello Ada." in out and "Again." in out
    roles = [m["role"] for m in model_server.bodies[2]["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]

    assert main(["sessions", "--dir", str(root)]) == 0
    listing = capsys.readouterr().out
    assert "work" in listing and " 2 " in listing and "30/15" in listing  # name, turns, tokens in/out (3 model calls)

    assert main(["sessions", "--dir", str(root), "show", "work"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == "user: greet Ada"
    assert shown[1] == '  → echo({"name": "Ada"})'
    assert shown[2].startswith("  ← echo: ") and len(shown) == 6

    assert main(["sessions", "--dir", str(root), "delete", "work"]) == 0
    assert main(["sessions", "--dir", str(root), "show", "work"]) == 2
    assert "no session 'work'" in capsys.readouterr().err


def test_session_with_no_store_is_a_usage_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", "--dir", str(root), "--no-store", "--session", "x", "hi"]) == 2
    assert "drop --no-store" in capsys.readouterr().err

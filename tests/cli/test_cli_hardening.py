"""The CLI with odd input (issue 10 §5, §6, §9, §13): real subprocesses, real files.

Too deep or huge arguments are a usage error (exit 2, no traceback); argument files and
stdin are read up to 16 MiB; `runs --limit` must be a count; a run the store could not
record makes the call exit non-zero; `validate --no-import` runs no project code.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from store_support import query

pytestmark = pytest.mark.slow  # every test here starts a process or a server

BIN = Path(sys.executable).parent
ROUTER = Path(__file__).resolve().parents[1] / "projects" / "router"


def _cli(*args: str, stdin: bytes | None = None, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(BIN / "skillyard"), *args], input=stdin, capture_output=True, timeout=timeout, cwd=cwd)
    out = subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8", "replace"),
                                      done.stderr.decode("utf-8", "replace"))
    assert "Traceback" not in out.stderr, out.stderr
    return out


# ─── §6: depth and number size: exit 2 ───────────────────────────────────────────────────


@pytest.mark.parametrize("text, expected", [
    ('{"name": ' + "[" * 1000 + "]" * 1000 + "}", "nested more than 64 levels deep"),
    ('{"name": "x", "count": 1' + "0" * 5000 + "}", "digits"),
    ('{"name": "\\ud800"}', "lone UTF-16 surrogate"),
    ('{"name": "x", "n": ' + "[" * 70 + "]" * 70 + "}", "nested more than 64 levels deep"),
], ids=["1000-deep", "10**5000", "surrogate", "70-deep"])
def test_unusable_arguments_exit_2_with_a_clear_message(tmp_path: Path, text: str, expected: str) -> None:
    source = tmp_path / "args.json"
    source.write_text(text, encoding="utf-8")
    done = _cli("call", "echo", "--dir", str(ROUTER), "--no-store", "--args-json", f"@{source}")
    assert done.returncode == 2, done
    assert expected in done.stderr, done.stderr


# ─── §9: bounded reads ───────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("flags", [["--args-json", "@/dev/zero"], ["--arg", "name=@/dev/zero"]], ids=["args-json", "arg"])
def test_an_endless_argument_file_stops_at_16_mib(flags: list[str]) -> None:
    done = _cli("call", "echo", "--dir", str(ROUTER), "--no-store", *flags, timeout=30)
    assert done.returncode == 2
    assert "more than 16 MiB" in done.stderr and "/dev/zero" in done.stderr, done.stderr


def test_stdin_stops_at_16_mib() -> None:
    done = _cli("call", "echo", "--dir", str(ROUTER), "--no-store", "--arg", "name=-", stdin=b"x" * (17 * 1024 * 1024))
    assert done.returncode == 2 and "stdin holds more than 16 MiB" in done.stderr, done.stderr


def test_a_file_under_the_cap_is_read() -> None:
    done = _cli("call", "echo", "--dir", str(ROUTER), "--no-store", "--arg", "name=-", "--quiet", stdin=b"Ada")
    assert done.returncode == 0 and '"Ada"' in done.stdout, done


@pytest.mark.parametrize("command", ["runs", "logs"])
@pytest.mark.parametrize("limit", ["-1", "0", "x"])
def test_limit_must_be_a_count(tmp_path: Path, command: str, limit: str) -> None:
    done = _cli(command, "--dir", str(ROUTER), "--limit", limit)
    assert done.returncode == 2 and "--limit" in done.stderr, done.stderr


# ─── §5: a run that could not be recorded is not a success ───────────────────────────────


@pytest.fixture
def odd_project(tmp_path: Path) -> Path:
    from test_store_isolation import PROJECT

    root = tmp_path / "odd"
    root.mkdir()
    for name, text in PROJECT.items():
        (root / name).write_text(text.lstrip("\n"), encoding="utf-8")
    (root / "config").mkdir()
    (root / "config" / "engine.yaml").write_text(f"store:\n  path: {tmp_path / 'runs.db'}\n", encoding="utf-8")
    return root


def test_a_surrogate_in_a_tools_output_is_recorded_and_printed_as_u_fffd(odd_project: Path, tmp_path: Path) -> None:
    done = _cli("call", "odd", "--dir", str(odd_project), "--arg", "kind=surrogate", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "page title \ufffd end" in done.stdout
    assert query(tmp_path / "runs.db", "SELECT status FROM runs") == [("ok",)]


def test_a_run_whose_data_could_not_be_recorded_exits_non_zero(odd_project: Path, tmp_path: Path) -> None:
    done = _cli("call", "odd", "--dir", str(odd_project), "--arg", "kind=huge", "--quiet")
    assert done.returncode == 1, done
    assert "this run was not recorded as it happened" in done.stderr, done.stderr
    assert query(tmp_path / "runs.db", "SELECT status FROM runs") == [("ok",)]  # the run is there, its data a note


# ─── §13: validate without importing ─────────────────────────────────────────────────────


def test_validate_says_it_imports_and_no_import_runs_no_project_code(tmp_path: Path) -> None:
    assert "imports the project's Python modules" in " ".join(_cli("validate", "--help").stdout.split())
    project = tmp_path / "p"
    project.mkdir()
    for name in ("tools.yaml", "skills.yaml", "workflows.yaml"):
        (project / name).write_text((ROUTER / name).read_text(encoding="utf-8"), encoding="utf-8")
    marker = tmp_path / "imported"
    (project / "router_skills.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n" + (ROUTER / "router_skills.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    done = _cli("validate", "--no-import", str(project))
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), "--no-import imported the module"
    assert "not imported: skills.yaml:4:15: skill 'echo': router_skills:echo" in done.stdout, done.stdout
    assert "4 python references not checked" in done.stdout
    done = _cli("validate", str(project))
    assert done.returncode == 0 and marker.exists() and "not imported" not in done.stdout


def test_validate_no_import_still_reports_every_other_problem(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    for name in ("tools.yaml", "skills.yaml"):
        (project / name).write_text((ROUTER / name).read_text(encoding="utf-8"), encoding="utf-8")
    workflows = (ROUTER / "workflows.yaml").read_text(encoding="utf-8").replace("skill: echo", "skill: echoo", 1)
    (project / "workflows.yaml").write_text(workflows, encoding="utf-8")
    done = _cli("validate", "--no-import", str(project))
    assert done.returncode == 2 and "unknown skill 'echoo'" in done.stderr, done.stderr
    assert not (project / "__pycache__").exists()


def _disk_of_300_kb() -> None:
    """In the child: files may not grow past 300 KB (EFBIG, as a full disk says ENOSPC)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))


def test_chat_exits_non_zero_when_its_run_could_not_be_recorded(odd_project: Path) -> None:
    (odd_project / "config" / "models.yaml").write_text(
        "default: demo\nmodels:\n  demo: {provider: scripted, options: {script: script.yaml}}\n", encoding="utf-8")
    (odd_project / "script.yaml").write_text(
        "turns:\n  - tool_calls: [{name: odd, arguments: {kind: big}}]\n  - text: Done.\n", encoding="utf-8")
    done = subprocess.run([str(BIN / "skillyard"), "chat", "go", "--dir", str(odd_project), "--quiet"],
                          capture_output=True, text=True, timeout=60, preexec_fn=_disk_of_300_kb)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1 and "Done." in done.stdout, done
    assert "this run was not recorded as it happened" in done.stderr and "disk I/O error" in done.stderr, done.stderr
    assert done.stderr.count("events not written as they were") == 1

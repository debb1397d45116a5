"""Shared fixtures. Keep this small; name fixtures for what they do."""

from __future__ import annotations

import atexit
import textwrap
from pathlib import Path
from typing import Callable

import pytest

WriteProject = Callable[[dict[str, "str | bytes"]], Path]


@pytest.fixture
def write_yaml_project(tmp_path: Path) -> WriteProject:
    """Write `{relative path: text or bytes}` into a fresh project directory and return it.

    Text is dedented and its first newline dropped, so a triple-quoted string's first line
    is line 1 of the file: the line numbers asserted in tests are the ones you read.
    """

    def write(files: dict[str, str | bytes]) -> Path:
        root = tmp_path / "project"
        root.mkdir(exist_ok=True)
        for name, content in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(textwrap.dedent(content).removeprefix("\n"), encoding="utf-8")
        return root

    return write


# ─── PostgreSQL (tests/pg_cluster.py): one throwaway cluster per session, a database per module ───


@pytest.fixture(scope="session")
def pg_cluster():  # type: ignore[no-untyped-def]
    """A PostgreSQL cluster of this test session (skips when PostgreSQL is not installed)."""
    from pg_cluster import PgCluster, find_bin

    bindir = find_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (no initdb on PATH or under /usr/lib/postgresql/*/bin); "
                    ".ci/run installs Debian's postgresql package")
    cluster = PgCluster(bindir)
    atexit.register(cluster.destroy)  # pg_ctl's server is no child of ours: stopped at exit if teardown never ran
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()
        atexit.unregister(cluster.destroy)


@pytest.fixture(scope="module")
def pg_url(pg_cluster) -> str:  # type: ignore[no-untyped-def]
    """The URL of a fresh database for this test module."""
    return pg_cluster.new_database()


# ─── why the web tests were skipped, said once at the end of the run ───


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """A skipped web test says why (no Chromium, no playwright) in one line, not behind `-rs`."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        if "test_web_ui" not in str(getattr(report, "nodeid", "") or getattr(report, "fspath", "")):
            continue
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in reasons.items():
        terminalreporter.write_line(f"web tests skipped ({count}): {reason}", yellow=True)


# ─── the tiers: a test that starts a process is `slow`, checked rather than hoped for ───

_spawned_by: dict[str, list[str]] = {}  # nodeid → the commands a test not marked slow started
_current: list[pytest.Item] = []  # the item in its setup or call phase, when it is not marked slow


def _watch_processes() -> None:
    """Note every process started while a test not marked `slow` sets up or runs.

    Session fixtures (a PostgreSQL cluster, a Temporal server) start in the setup of the first
    test that asks for them, so that test is the one that must be marked."""
    import subprocess

    original = subprocess.Popen.__init__

    def noting_init(self, args, *rest, **kwargs):  # type: ignore[no-untyped-def]
        if _current:
            command = args if isinstance(args, str) else " ".join(str(a) for a in list(args)[:3])
            _spawned_by.setdefault(_current[0].nodeid, []).append(command)
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = noting_init  # type: ignore[method-assign]


def pytest_configure(config) -> None:  # type: ignore[no-untyped-def]
    import platform

    _ = platform.uname().processor  # cached for the session: its `uname -p` (asked by the openai SDK) is not a test's process
    _watch_processes()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):  # type: ignore[no-untyped-def]
    if item.get_closest_marker("slow") is None:
        _current.append(item)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item):  # type: ignore[no-untyped-def]
    _current.clear()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    commands = _spawned_by.pop(item.nodeid, None) if call.when == "call" else None
    if commands and report.passed:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} started a process ({commands[0]!r}"
                           f"{f' and {len(commands) - 1} more' if len(commands) > 1 else ''}) but is not marked "
                           "slow: add @pytest.mark.slow (or pytestmark = pytest.mark.slow for the module), "
                           "or test it in process (main(argv), httpx.ASGITransport)")

"""`import engine` stays light: structlog (and rich behind it) load only when something logs."""

from __future__ import annotations

import pytest

import subprocess
import sys

pytestmark = pytest.mark.slow  # every test here starts a process or a server


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def test_import_engine_does_not_import_structlog() -> None:
    assert _run("import sys, engine; print('structlog' in sys.modules)") == "False"


def test_the_logger_binds_structlog_on_first_use() -> None:
    out = _run(
        "import sys\n"
        "from engine.logging import configure_logging, logger\n"
        "configure_logging('json', 'info')\n"
        "logger.info('hello', tool='x')\n"
        "print('structlog' in sys.modules, file=sys.stdout)\n"
    )
    assert out == "True"

"""`import engine` stays light: the SDKs, the service, Temporal, telemetry and the PostgreSQL driver
load when first used; structlog (and rich behind it) only when something logs; the command
line's `--help` imports no more than its parser."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # every test here starts a process

MAX_MODULES = 450  # what `import engine` may load (the interpreter's own start included)
LOADED_WHEN_USED = ("openai", "anthropic", "mcp", "temporalio", "fastapi", "starlette", "psycopg", "opentelemetry")


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout.strip()


def _loaded_after(statement: str) -> tuple[int, list[str]]:
    """How many modules the process has after `statement`, and which of LOADED_WHEN_USED are among them."""
    out = _run(
        "import sys\n"
        f"{statement}\n"
        "import json\n"  # (already loaded by then: it is not counted twice)
        f"heavy = sorted({{m.partition('.')[0] for m in sys.modules}} & {set(LOADED_WHEN_USED)!r})\n"
        "print(json.dumps([len(sys.modules), heavy]))\n"
    )
    count, heavy = json.loads(out)
    return count, heavy


@pytest.mark.parametrize("statement", [
    "import engine",
    "from engine import Engine, load_project",  # what an embedder writes first
    "import engine.cli.main",  # what `run-workflow` and `skillyard` start with
])
def test_import_engine_loads_no_sdk_and_few_modules(statement: str) -> None:
    count, heavy = _loaded_after(statement)
    assert heavy == []
    assert count <= MAX_MODULES, f"{statement}: {count} modules"


def test_help_imports_only_the_parser() -> None:
    """`skillyard --help` builds every subcommand's parser, and loads nothing a command runs."""
    out = _run(
        "import sys, contextlib, io\n"
        "from engine.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('engine.link', 'engine._engine', 'engine.store', "
        "'engine.batch', 'pydantic', 'jinja2', 'yaml', 'jsonschema'))))\n"
    )
    assert out == "[]"


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


def test_a_provider_sdk_is_imported_when_a_model_of_that_provider_is_built() -> None:
    out = _run(
        "import sys\n"
        "from engine.providers.registry import provider_factory\n"
        "from engine.spec.models import ModelSpec\n"
        "before = 'openai' in sys.modules\n"
        "provider_factory('openai')(ModelSpec(provider='openai', model='m', api_key='k'), None)\n"
        "print(before, 'openai' in sys.modules, 'anthropic' in sys.modules)\n"
    )
    assert out == "False True False"

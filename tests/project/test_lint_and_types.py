"""The type check and the lint hold in CI: `.ci/run` runs `ruff check .` and `mypy engine`
before the tests, both configured in pyproject.toml, and a `# type: ignore` left in engine/
names the error it silences and says why (the commands themselves run in CI, not here)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<rest>.*)$")
NAMED_WITH_WHY = re.compile(r"^\[[a-z-]+(, *[a-z-]+)*\]\s+#\s*\S")


def _commands(script: str) -> list[str]:
    return [line.strip() for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_the_lint_and_the_type_check_before_the_tests() -> None:
    commands = _commands((REPO / ".ci" / "run").read_text(encoding="utf-8"))
    tests = next(at for at, command in enumerate(commands) if command.startswith("pytest"))
    assert "ruff check ." in commands[:tests] and "mypy engine" in commands[:tests]


def test_both_are_configured_in_pyproject_and_installed_by_the_dev_extra() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    mypy = config["tool"]["mypy"]
    assert mypy["check_untyped_defs"] is True and mypy["warn_unused_ignores"] is True
    assert {"F", "E", "B", "I"} <= set(config["tool"]["ruff"]["lint"]["select"])  # pyflakes, pycodestyle, bugbear, isort
    dev = {re.split(r"[<>=\[ ]", requirement)[0].lower() for requirement in config["project"]["optional-dependencies"]["dev"]}
    assert {"mypy", "ruff", "types-pyyaml", "types-jsonschema"} <= dev


def _ignores_without_why() -> list[str]:
    found = []
    for path in sorted((REPO / "engine").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = IGNORE.search(line)
            if match and not NAMED_WITH_WHY.match(match["rest"].strip()):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    return found


def test_every_type_ignore_names_its_error_code_and_why() -> None:
    assert _ignores_without_why() == []


def test_a_bare_ignore_is_found() -> None:
    assert not NAMED_WITH_WHY.match("")  # `# type: ignore`
    assert not NAMED_WITH_WHY.match("[arg-type]")
    assert NAMED_WITH_WHY.match("[arg-type]  # the step's view of the call")
    assert NAMED_WITH_WHY.match("[call-arg, misc]  # why")

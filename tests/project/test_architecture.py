"""engine/ keeps its layers (docs/architecture.md): `lint-imports` keeps every contract in
pyproject.toml, and no files import each other in a circle, not even through a type-only
import or an import inside a function. A planted wrong import makes both checks fail.

Both checks run in process (the fast tier); the `lint-imports` command itself, and the checks
on a copy of engine/ with a planted import, run in subprocesses (slow)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[2]


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the engine/ package under `root`, with `root`'s pyproject.toml."""
    script = Path(sys.executable).parent / "lint-imports"
    command = [str(script)] if script.exists() else [shutil.which("lint-imports") or "lint-imports"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([*command, "--no-cache", "--no-logo", str(root / "pyproject.toml")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def _graph() -> dict[str, list[str]]:
    """engine/'s imports as grimp sees them (type-only ones and those inside functions too)."""
    graph = grimp.build_graph("engine", cache_dir=None)
    return {module: sorted(graph.find_modules_directly_imported_by(module)) for module in graph.modules}


def _circles(root: Path) -> list[list[str]]:
    """Every set of engine modules that import each other in a circle (strongly connected
    components of more than one module), over all imports grimp sees."""
    code = (
        "import grimp, json, sys\n"
        "sys.setrecursionlimit(10000)\n"
        "g = grimp.build_graph('engine', cache_dir=None)\n"
        "print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                         capture_output=True, text=True, timeout=300, check=True).stdout
    return strongly_connected(json.loads(out))


def strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(graph.get(successor, ()))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_engine_keeps_every_import_contract(capsys: pytest.CaptureFixture[str]) -> None:
    import importlinter.cli  # noqa: F401 - sets import-linter up, as its command does
    from importlinter.application import use_cases

    kept = use_cases.lint_imports(config_filename=str(REPO / "pyproject.toml"), cache_dir=None, no_logo=True)
    out = capsys.readouterr().out
    assert kept, out
    assert "0 broken" in out


def test_no_files_of_engine_import_each_other_in_a_circle() -> None:
    assert strongly_connected(_graph()) == []


@pytest.mark.slow
def test_the_lint_imports_command_keeps_every_contract() -> None:
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_grimp_sees_type_only_imports_and_imports_inside_functions() -> None:
    """The circle check counts what a reader counts: `if TYPE_CHECKING:` imports and lazy ones."""
    graph = grimp.build_graph("engine", cache_dir=None)
    # engine/_engine.py imports Store only for a type, and the agent only inside Engine.agent()
    assert "engine.store" in graph.find_modules_directly_imported_by("engine._engine")
    assert "engine.runtime.agent" in graph.find_modules_directly_imported_by("engine._engine")


def test_the_tarjan_helper_finds_a_circle() -> None:
    assert strongly_connected({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert strongly_connected({"a": ["b"], "b": []}) == []


@pytest.mark.slow
def test_a_wrong_import_fails_both_checks(tmp_path: Path) -> None:
    """A copy of engine/ where the Run (runtime, low) imports the linker (link, above it)."""
    shutil.copytree(REPO / "engine", tmp_path / "engine", ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    run = tmp_path / "engine" / "runtime" / "run.py"
    run.write_text(run.read_text() + "\n\ndef _planted() -> None:\n    from ..link.linker import load_project  # noqa: F401\n")
    done = _lint_imports(tmp_path)
    assert done.returncode != 0
    assert "engine.runtime.run -> engine.link.linker" in done.stdout
    assert any("engine.runtime.run" in circle and "engine.link.linker" in circle for circle in _circles(tmp_path))


@pytest.mark.slow
def test_a_new_top_level_module_must_be_given_a_layer(tmp_path: Path) -> None:
    """`exhaustive`: a module added directly in engine/ fails until pyproject.toml places it."""
    shutil.copytree(REPO / "engine", tmp_path / "engine", ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "engine" / "helpers.py").write_text('"""A module nobody placed."""\n')
    done = _lint_imports(tmp_path)
    assert done.returncode != 0
    assert "helpers" in done.stdout


MAX_FUNCTION_LINES = 100  # issue 29 §2: no function in engine/ longer than this (a screen or two)


def test_no_function_in_engine_is_longer_than_100_lines() -> None:
    long = []
    for path in sorted((REPO / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {lines} lines")
    assert long == []

"""The command line, as a user runs it: real subprocesses on real project directories.

Each subprocess pays for a Python start and an engine import, so the runs are declared once
(`RUNS`), started together, and each test reads the run it needs. Extra edge cases of the
same code paths run in-process through the entry points (`run_workflow_main`, `main`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest

from engine.cli.main import main, run_workflow_main

ROOT = Path(__file__).resolve().parents[2]
ROUTER = Path(__file__).resolve().parents[1] / "projects" / "router"
BIN = Path(sys.executable).parent
TEXT = "Rust rust RUST Kafka kafka Postgres. Tokio tokio and gRPC: Ferris the crab likes Rust."
JD = ["--arg", "jdText=@examples/jd.txt"]


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    script: str = "run-workflow"
    stdin: str = ""
    dir: str = "root"  # root | tmp (a scratch directory with files and a temp project)


RUNS: dict[str, Run] = {
    "plan": Run(("analyzeJobAndGeneratePlan", *JD)),
    "call-events": Run(("call", "analyzeJobAndGeneratePlan", *JD, "--output", "events", "--quiet"), script="skillyard"),
    "result": Run(("textReport", "--arg", f"text={TEXT}", "--arg", "topN=3", "--output", "result")),
    "args-inline": Run(("textReport", "--args-json", json.dumps({"text": TEXT, "topN": 5}), "--arg", "topN=2", "--quiet")),
    "args-file": Run(("textReport", "--dir", str(ROOT), "--args-json", "@args.json", "--quiet"), dir="tmp"),
    "args-stdin": Run(("textReport", "--args-json", "-", "--quiet"), stdin=json.dumps({"text": TEXT, "topN": 2})),
    "missing-file": Run(("analyzeJobAndGeneratePlan", "--arg", "jdText=@examples/missing.txt")),
    "unknown-tool": Run(("noSuchTool", "--arg", "x=1")),
    "invalid-args": Run(("textReport", "--arg", "topN=0", "--arg", "extra=1", "--output", "result")),
    "model-nope": Run(("textReport", "--arg", "text=x", "--model", "nope")),
    "fails": Run(("boom", "--dir", str(ROUTER), "--arg", "why=testing")),
    "tools": Run(("tools",), script="skillyard"),
}


def command(name: str) -> list[str]:
    """The installed console script, or the same entry point through this interpreter."""
    script = BIN / name
    if script.exists():
        return [str(script)]
    function = "run_workflow_main" if name == "run-workflow" else "main"
    return [sys.executable, "-c", f"import sys; from engine.cli.main import {function}; sys.exit({function}())"]


def make_scratch(tmp: Path) -> None:
    """args.json, jd.txt, and a copy of the default project with a second model `alt` (also the mock)."""
    (tmp / "args.json").write_text(json.dumps({"text": TEXT, "topN": 2}))
    (tmp / "jd.txt").write_text("Platform engineer: Kubernetes, Terraform, Go.")
    project = tmp / "project"
    project.mkdir()
    for name in ("tools.yaml", "skills.yaml", "workflows.yaml"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "capabilities", project / "capabilities", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "config").mkdir()
    (project / "config" / "models.yaml").write_text(
        "default: mock\nmodels:\n  mock: {provider: mock}\n  alt: {provider: mock}\n"
    )


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str
    lines: list[str] = field(default_factory=list)

    def json(self) -> object:
        return json.loads(self.stdout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Done]:
    tmp = tmp_path_factory.mktemp("cli")
    make_scratch(tmp)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}

    def start(run: Run) -> Done:
        store = ("--no-store",) if run.script == "run-workflow" or run.args[0] == "call" else ()
        done = subprocess.run(
            [*command(run.script), *run.args, *store], cwd=ROOT if run.dir == "root" else tmp, input=run.stdin,
            capture_output=True, text=True, timeout=120, env=env,
        )
        return Done(done.returncode, done.stdout, done.stderr, done.stdout.splitlines())

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(RUNS, pool.map(start, RUNS.values()), strict=True))
    return results


@pytest.fixture
def run(runs: dict[str, Done], request: pytest.FixtureRequest) -> Done:
    done = runs[request.param]
    assert "Traceback" not in done.stderr, done.stderr
    return done


def uses(name: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("run", [name], indirect=True)


def plan_schema() -> dict:
    from engine import Engine

    schema = Engine.from_dir(ROOT).project.skills["generateSevenDayPlan"].output_schema_raw
    assert schema is not None
    return schema


# ─── the main job ───────────────────────────────────────────────────────────────────────


@pytest.mark.slow
@uses("plan")
def test_run_workflow_prints_the_plan_and_a_timeline(run: Done) -> None:
    assert run.returncode == 0, run.stderr
    plan = run.json()
    assert [day["day"] for day in plan["days"]] == [1, 2, 3, 4, 5, 6, 7]
    jsonschema.validate(plan, plan_schema())
    timeline = run.stderr
    for needed in ("analyzeJobAndGeneratePlan", "extract-requirements", "generate-plan", "extractJobRequirements", " ms"):
        assert needed in timeline, timeline
    assert timeline.index("extract-requirements") < timeline.index("generate-plan")




@pytest.mark.slow
@uses("result")
def test_output_result_is_the_tool_result(run: Done) -> None:
    assert run.returncode == 0, run.stderr
    result = run.json()
    assert list(result) == ["ok", "tool", "run_id", "tool_call_id", "data", "error", "metadata"]
    assert result["ok"] is True and result["tool"] == "textReport" and result["error"] is None
    assert "duration_ms" in result["metadata"]
    # `text` is not JSON, so it stays a string; `topN=3` is JSON, so it is the integer 3.
    assert [k["word"] for k in result["data"]["stats"]["keywords"]] == ["rust", "kafka", "tokio"]


@pytest.mark.slow
@uses("call-events")
def test_output_events_is_one_json_per_line_ending_with_the_result(run: Done, runs: dict[str, Done]) -> None:
    """`skillyard call` is run-workflow; --quiet leaves stderr empty; events end with the result."""
    assert run.returncode == 0
    assert run.stderr == ""
    *events, result = [json.loads(line) for line in run.lines]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "tool_call_start" and events[-1]["type"] == "tool_call_result"
    assert {e["run_id"] for e in events} == {result["run_id"]}
    assert result["ok"] is True and result["tool"] == "analyzeJobAndGeneratePlan"
    assert result["data"] == runs["plan"].json()  # same tool, same input, deterministic mock


# ─── arguments ──────────────────────────────────────────────────────────────────────────


@pytest.mark.slow
def test_args_json_inline_file_and_stdin(runs: dict[str, Done]) -> None:
    inline, from_file, from_stdin = runs["args-inline"], runs["args-file"], runs["args-stdin"]
    for done in (inline, from_file, from_stdin):
        assert done.returncode == 0, done.stderr
        assert len(done.json()["stats"]["keywords"]) == 2
    assert inline.stdout == from_file.stdout == from_stdin.stdout  # --arg topN=2 overrides the inline 5


# ─── exit codes ─────────────────────────────────────────────────────────────────────────


@pytest.mark.slow
@uses("missing-file")
def test_missing_arg_file_exits_2_cleanly(run: Done) -> None:
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip() == "error: --arg jdText: file not found: examples/missing.txt"


@pytest.mark.slow
@uses("unknown-tool")
def test_unknown_tool_exits_2(run: Done) -> None:
    assert run.returncode == 2 and run.stdout == ""
    assert "unknown_tool" in run.stderr
    assert "available tools: analyzeJobAndGeneratePlan, textReport" in run.stderr


@pytest.mark.slow
@uses("invalid-args")
def test_invalid_arguments_exit_2(run: Done) -> None:
    assert run.returncode == 2
    result = run.json()
    assert result["ok"] is False and result["error"]["code"] == "invalid_arguments"
    errors = result["error"]["details"]["errors"]
    assert sorted(e["pointer"] for e in errors) == ["/", "/", "/topN"]  # missing text, extra key, topN < 1
    assert "invalid_arguments" in run.stderr and "/topN" in run.stderr


@pytest.mark.slow
@uses("model-nope")
def test_unknown_model_exits_2(run: Done) -> None:
    assert run.returncode == 2 and run.stdout == ""
    assert "--model nope: unknown model" in run.stderr and "mock" in run.stderr


@pytest.mark.slow
@uses("fails")
def test_a_tool_that_fails_while_running_exits_1(run: Done) -> None:
    assert run.returncode == 1 and run.stdout == ""
    assert "execution_error" in run.stderr and "kaboom: testing" in run.stderr


# ─── model override and other commands ──────────────────────────────────────────────────


def test_model_override_reaches_every_prompt_skill(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    make_scratch(tmp_path)
    monkeypatch.chdir(tmp_path)
    for model, expected in ((None, ["mock", "mock"]), ("alt", ["alt", "alt"])):
        override = ["--model", model] if model else []
        code = run_workflow_main(["analyzeJobAndGeneratePlan", "--dir", "project", "--arg", "jdText=@jd.txt", *override,
                                  "--output", "events", "--quiet", "--no-store"])
        assert code == 0
        events = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:-1]
        stages = [e["data"] for e in events if e["type"] == "skill_progress_delta" and e["data"].get("stage") == "model_call"]
        assert [d["model"] for d in stages] == expected


@pytest.mark.slow
@uses("tools")
def test_skillyard_tools_lists_tools_and_parameters(run: Done) -> None:
    assert run.returncode == 0, run.stderr
    for needed in ("analyzeJobAndGeneratePlan", "textReport", "jdText", "candidateProfile", "topN", "(required)", "default 5"):
        assert needed in run.stdout, run.stdout


# ─── in-process: more cases of the same code paths ──────────────────────────────────────


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["textReport", "--args-json", "@no/such/file.json"], "--args-json: file not found"),
        (["textReport", "--args-json", "{not json"], "--args-json: not valid JSON"),
        (["textReport", "--args-json", "[1, 2]"], "expected a JSON object"),
        (["textReport", "--arg", "novalue"], "key=value"),
        (["textReport", "--arg", "=x"], "key=value"),
        (["textReport", "--arg", "text=x", "--dir", "no/such/dir"], "does not exist"),
    ],
)
def test_more_usage_errors_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert run_workflow_main([*args, "--no-store"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err and "Traceback" not in err


def test_quiet_failure_prints_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_workflow_main(["boom", "--dir", str(ROUTER), "--quiet", "--no-store"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == ["error: execution_error: skill 'boom' raised ValueError: kaboom: because"]


def test_confirmation_needs_yes_without_a_terminal(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", open(os.devnull))
    assert run_workflow_main(["dangerous", "--dir", str(ROUTER), "--arg", "name=x", "--no-store"]) == 1
    assert "confirmation_denied" in capsys.readouterr().err
    assert run_workflow_main(["dangerous", "--dir", str(ROUTER), "--arg", "name=x", "--yes", "--quiet", "--no-store"]) == 0
    assert json.loads(capsys.readouterr().out) == {"name": "x"}


def test_arg_reads_a_file_and_stdin(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    (tmp_path / "text.txt").write_text("alpha beta gamma")
    assert run_workflow_main(["echo", "--dir", str(ROUTER), "--arg", f"name=@{tmp_path / 'text.txt'}", "--quiet", "--no-store"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "alpha beta gamma"
    monkeypatch.setattr(sys, "stdin", io.StringIO("from stdin"))
    assert run_workflow_main(["echo", "--dir", str(ROUTER), "--arg", "name=-", "--quiet", "--no-store"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "from stdin"


def test_tools_json_and_policy_marks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "project"
    shutil.copytree(ROUTER, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "config").mkdir()
    (root / "config" / "engine.yaml").write_text("router:\n  deny: [boom]\n")
    assert main(["tools", "--dir", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("echoOff") and "disabled" in line for line in lines)
    assert any(line.startswith("boom") and "denied" in line for line in lines)
    assert any("--arg count=<integer> (default 3)" in line for line in lines)
    assert main(["tools", "--dir", str(root), "--json"]) == 0
    tools = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert tools["echo"]["parameters"]["properties"]["count"]["default"] == 3
    assert tools["echoOff"]["enabled"] is False
    assert main(["tools", "--dir", str(root), "--json", "--format", "anthropic"]) == 0
    names = {t["name"] for t in json.loads(capsys.readouterr().out)}
    assert "boom" not in names and "echoOff" not in names and "echo" in names


def test_arg_values_parse_as_strict_json_or_stay_text() -> None:
    from engine.cli.arguments import build_arguments

    parsed = build_arguments(None, ["n=3", "f=2.5", "b=true", "z=null", "l=[1]", "o={\"a\": 1}", "s=hello world",
                                    "q=\"quoted\"", "nan=NaN", "inf=-Infinity", "big=1e400", "eq=a=b", "empty="])
    assert parsed == {"n": 3, "f": 2.5, "b": True, "z": None, "l": [1], "o": {"a": 1}, "s": "hello world",
                      "q": "quoted", "nan": "NaN", "inf": "-Infinity", "big": "1e400", "eq": "a=b", "empty": ""}
    with pytest.raises(Exception, match="NaN is not a JSON value"):
        build_arguments('{"a": NaN}', [])


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("skillyard ")

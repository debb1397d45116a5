"""`skillyard batch`: datasets, expectations, judges, progress, Ctrl-C and --resume, compare.

Every CLI test runs the real command in a subprocess on tests/projects/batch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.batch.dataset import load_cases
from engine.batch.report import compare, json_diff
from engine.errors import UsageError
from engine.link.expect import compile_checks

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "batch"


def batch(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    code = "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "batch", *argv, "--dir", str(PROJECT), "--no-store"],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ─── datasets ───────────────────────────────────────────────────────────────────────────


def test_json_lines_cases_with_and_without_an_envelope(tmp_path):
    data = write(tmp_path / "c.jsonl", '{"id": "x", "arguments": {"text": "a"}, "expect": {"equals": 1}}\n\n{"text": "b"}\n')
    first, second = load_cases(data)
    assert (first.id, first.arguments, first.expect, first.where) == ("x", {"text": "a"}, {"equals": 1}, f"{data}:1")
    assert (second.id, second.arguments, second.expect) == ("3", {"text": "b"}, None)  # id: the line number


def test_csv_columns_are_arguments_and_json_cells_are_parsed_unless_the_parameter_is_a_string(tmp_path):
    data = write(tmp_path / "c.csv", 'id,text,delay,tags,expect\nz1,01234,0.5,"[1, 2]","{""equals"": 3}"\n,plain,,,\n')
    first, second = load_cases(data, frozenset({"text"}))
    assert first.id == "z1" and first.arguments == {"text": "01234", "delay": 0.5, "tags": [1, 2]}
    assert first.expect == {"equals": 3}
    assert second.id == "2" and second.arguments == {"text": "plain"}  # empty cells are left out


def test_yaml_cases_know_their_lines(tmp_path):
    data = write(tmp_path / "c.yaml", "cases:\n  - id: one\n    arguments: {text: a}\n  - text: b\n")
    first, second = load_cases(data)
    assert first.where.endswith("c.yaml:2") and second.where.endswith("c.yaml:4") and second.id == "2"


@pytest.mark.parametrize("name, text, expected", [
    ("bad.jsonl", '{"text": "a"}\n{"text": \n', "bad.jsonl:2: not JSON"),
    ("dup.jsonl", '{"id": 1, "arguments": {}}\n{"id": "1", "arguments": {}}\n', "dup.jsonl:2: case id '1' was already used at"),
    ("list.jsonl", '[1, 2]\n', "list.jsonl:1: a case must be a JSON object"),
    ("keys.jsonl", '{"arguments": {}, "expected": 1}\n', "unknown case key(s) expected"),
    ("bad.yaml", "- a: [1\n", "bad.yaml:2: not valid YAML"),
    ("map.yaml", "a: 1\n", "expected a list of cases"),
    ("c.txt", "x", "unknown format '.txt'"),
    ("wide.csv", "text\na,b\n", "wide.csv:2: more cells than columns"),
])
def test_bad_datasets_name_the_file_and_line(tmp_path, name, text, expected):
    with pytest.raises(UsageError) as caught:
        load_cases(write(tmp_path / name, text))
    assert expected in str(caught.value)


# ─── expectations ───────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("expect, message", [
    ({"equals": 1, "contains": "a"}, "2 operators"),
    ({"path": "stats", "equals": 1}, "path must be a JSON Pointer"),
    ({"matches": "("}, "not a regular expression"),
    ({"schema": {"type": "nonsense"}}, "not a valid JSON Schema"),
    ({"approx": "3"}, "approx takes a number"),
    ({"equals": 1, "tolerance": 1}, "tolerance only goes with approx"),
    ({"judge": "nobody"}, "no skill 'nobody'"),
    ({"equal": 1}, "unknown key(s) equal"),
])
def test_bad_expectations_are_refused_before_anything_runs(expect, message):
    with pytest.raises(UsageError) as caught:
        compile_checks(expect, "cases.yaml:7", frozenset({"lengthJudge"}))
    assert str(caught.value).startswith("cases.yaml:7: expect") and message in str(caught.value)


def test_a_failed_schema_expectation_and_a_refusing_judge_say_where_the_value_fails():
    import asyncio

    from engine import Engine
    from engine.batch.judge import Judges
    from engine.link.expect import JudgeError, check_result
    from engine.runtime.result import ToolResult

    checks = compile_checks({"schema": {"type": "object", "required": ["length"]}}, "cases.yaml:1")
    verdict, = asyncio.run(check_result(checks, ToolResult(True, "measure", "run_1", "call_1", {}), {}, None))
    assert verdict["ok"] is False and verdict["message"].startswith("/: ") and "'length'" in verdict["message"]
    judges = Judges(Engine.from_dir(PROJECT))
    with pytest.raises(JudgeError, match=r"its input schema refuses \{case, output\}: /: "):
        asyncio.run(judges("measureText", {"case": {}, "output": {}}))  # it takes {text, delay}, not a verdict's input


def test_json_diff_is_compact_and_ordered():
    assert list(json_diff({"a": 1, "b": [1, 2], "c": "x"}, {"a": 2, "b": [1, 3], "d": True})) == [
        "/a: 1 → 2", "/b/1: 2 → 3", "/c: removed", "/d: added true"]


# ─── the command ────────────────────────────────────────────────────────────────────────


@pytest.mark.slow
def test_a_batch_writes_one_line_per_case_checks_every_operator_and_runs_judges(tmp_path):
    data = write(tmp_path / "cases.yaml", """
- id: all
  arguments: {text: hello world}
  expect:
    - {path: /words, equals: 2}
    - {path: /upper, contains: HELLO}
    - {path: /upper, matches: "^HELLO"}
    - {path: /ratio, approx: 5.5, tolerance: 0.01}
    - {schema: {type: object, required: [length]}}
    - {judge: lengthJudge}
    - {judge: modelJudge}
- id: fails-as-expected
  arguments: {text: boom}
  expect: {error: execution_error}
""")
    out = tmp_path / "results.jsonl"
    done = batch("measure", "--data", str(data), "--out", str(out))
    assert done.returncode == 0, done.stderr
    by_id = {r["id"]: r for r in records(out)}
    assert set(by_id) == {"all", "fails-as-expected"}
    verdicts = by_id["all"]["expect"]
    assert [v["check"] for v in verdicts] == ["equals", "contains", "matches", "approx", "schema", "judge", "judge"]
    assert all(v["ok"] for v in verdicts), verdicts
    assert verdicts[5]["score"] == 11 and verdicts[5]["message"] == "length 11 < 20"
    assert verdicts[6]["judge"] == "modelJudge"  # a prompt skill on the mock model, as an LLM judge
    assert by_id["all"]["data"]["words"] == 2 and by_id["all"]["run_id"].startswith("run_")
    assert isinstance(by_id["all"]["duration_ms"], float)
    assert by_id["fails-as-expected"]["ok"] is False and by_id["fails-as-expected"]["error"]["code"] == "execution_error"
    assert "expectations 8/8 held" in done.stderr and "tokens " in done.stderr  # the judge's model used tokens
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_exit_1_when_an_expectation_fails_or_a_case_fails_unexpectedly(tmp_path):
    data = write(tmp_path / "c.jsonl", '{"id": "long", "arguments": {"text": "this text is longer than twenty"}, '
                                       '"expect": {"judge": "lengthJudge"}}\n{"id": "boom", "arguments": {"text": "boom"}}\n')
    done = batch("measure", "--data", str(data))
    assert done.returncode == 1
    assert "failed       1  (execution_error 1)" in done.stderr
    assert "expectations 0/2 held" in done.stderr  # boom has no expect: the tool's batch default applies, and fails


@pytest.mark.slow
@pytest.mark.parametrize("argv, message", [
    (["measure"], "--data FILE is required"),
    (["nosuch", "--data", "x.jsonl"], "unknown tool 'nosuch'"),
    (["measure", "--data", "/nonexistent.jsonl"], "cannot read it"),
    (["measure", "--data", "{data}", "--model", "gpt-none"], "--model gpt-none: unknown model"),
    (["measure", "--data", "{data}", "--filter", "zz"], "--filter: no case with id zz"),
    (["measure", "--data", "{bad_expect}"], ":1: expect: matches: not a regular expression"),
    (["measure", "--data", "{not_judge}"], "judge 'notAJudge': its output schema must declare"),
    (["measure", "--data", "{data}", "--concurrency", "0"], "must be 1 or more"),
    (["compare", "only-one.jsonl"], "usage: skillyard batch compare"),
])
def test_usage_errors_exit_2_with_one_clear_line(tmp_path, argv, message):
    files = {
        "data": write(tmp_path / "d.jsonl", '{"text": "a"}\n'),
        "bad_expect": write(tmp_path / "e.jsonl", '{"arguments": {"text": "a"}, "expect": {"matches": "("}}\n'),
        "not_judge": write(tmp_path / "j.jsonl", '{"arguments": {"text": "a"}, "expect": {"judge": "notAJudge"}}\n'),
    }
    done = batch(*(arg.format(**files) for arg in argv))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_progress_off_a_terminal_is_a_plain_line_per_five_percent(tmp_path):
    data = write(tmp_path / "c.jsonl", "".join(json.dumps({"text": f"case {i}"}) + "\n" for i in range(100)))
    done = batch("measure", "--data", str(data), "--concurrency", "8")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if " · ok " in line]
    assert 18 <= len(lines) <= 21, lines  # every 5 cases, and the last
    assert lines[-1].startswith("100/100 · ok 100 · failed 0") and "\r" not in done.stderr
    assert "ETA" in lines[0]


@pytest.mark.slow
def test_limit_and_filter_pick_cases(tmp_path):
    data = write(tmp_path / "c.jsonl", "".join(json.dumps({"id": f"c{i}", "arguments": {"text": f"t {i}"}}) + "\n" for i in range(6)))
    out = tmp_path / "r.jsonl"
    assert batch("measure", "--data", str(data), "--filter", "c4", "c1", "--out", str(out)).returncode == 0
    assert sorted(r["id"] for r in records(out)) == ["c1", "c4"]
    out.unlink()
    assert batch("measure", "--data", str(data), "--limit", "3", "--out", str(out)).returncode == 0
    assert sorted(r["id"] for r in records(out)) == ["c0", "c1", "c2"]


@pytest.mark.slow
def test_ctrl_c_leaves_a_valid_file_and_resume_runs_only_the_missing_cases(tmp_path):
    data = write(tmp_path / "c.jsonl", "".join(json.dumps({"id": f"c{i}", "arguments": {"text": f"t{i}", "delay": 0.3}}) + "\n"
                                               for i in range(12)))
    out, counts = tmp_path / "r.jsonl", tmp_path / "ran.txt"
    env = {**os.environ, "BATCH_COUNT_FILE": str(counts)}
    code = "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "batch", "measure", "--data", str(data), "--out", str(out),
                             "--concurrency", "2", "--dir", str(PROJECT), "--no-store"],
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stderr = proc.communicate(timeout=30)[1]
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr and "Traceback" not in stderr
    first = records(out)  # every line parses: the file is valid
    assert 3 <= len(first) < 12
    resumed = batch("measure", "--data", str(data), "--resume", str(out), "--concurrency", "4", env={"BATCH_COUNT_FILE": str(counts)})
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {len(first)} of 12 cases already in" in resumed.stderr
    ids = [r["id"] for r in records(out)]
    assert sorted(ids) == sorted(f"c{i}" for i in range(12)) and len(ids) == len(set(ids))
    ran = counts.read_text().split()
    assert sorted(set(ran)) == sorted(f"t{i}" for i in range(12))
    assert all(ran.count(f"t{i}") == 1 for i in range(12) if f"c{i}" in {r["id"] for r in first})  # done cases never ran again


@pytest.mark.slow
def test_compare_names_each_regression_and_exits_1(tmp_path):
    before_data = write(tmp_path / "b.jsonl", '{"id": "x", "arguments": {"text": "short"}, "expect": {"judge": "lengthJudge"}}\n'
                                              '{"id": "y", "arguments": {"text": "same"}}\n{"id": "z", "arguments": {"text": "boom"}}\n')
    after_data = write(tmp_path / "a.jsonl", '{"id": "x", "arguments": {"text": "now it is much longer"}, "expect": {"judge": "lengthJudge"}}\n'
                                             '{"id": "y", "arguments": {"text": "same"}}\n{"id": "z", "arguments": {"text": "fine now"}}\n')
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    assert batch("measure", "--data", str(before_data), "--out", str(before)).returncode == 1  # z fails
    run = batch("measure", "--data", str(after_data), "--out", str(after), "--baseline", str(before))
    assert run.returncode == 1  # x's expectation fails now
    assert "x: REGRESSION expectation judge (lengthJudge): held → failed" in run.stdout
    done = batch("compare", str(before), str(after))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert any(line.startswith("x: REGRESSION") and "output /length: 5 → 21" in line for line in lines)
    assert any(line.startswith("z: fixed failed → ok") for line in lines)
    assert lines[-1] == "1 regression, 1 fix, 0 changed, 1 unchanged"
    same = batch("compare", str(after), str(after))
    assert same.returncode == 0 and same.stdout.splitlines()[-1] == "0 regressions, 0 fixes, 0 changed, 3 unchanged"


def test_compare_counts_new_and_missing_cases():
    result = compare([{"id": "a", "ok": True, "data": 1}], [{"id": "b", "ok": True, "data": 1}])
    assert (result.added, result.removed) == (1, 1) and result.lines == ["b: new case (ok)", "a: missing from the new results"]


@pytest.mark.slow
def test_the_tools_batch_defaults_apply_to_cases_without_expect(tmp_path):
    data = write(tmp_path / "c.jsonl", '{"id": "plain", "arguments": {"text": "hi"}}\n'
                                       '{"id": "own", "arguments": {"text": "hi"}, "expect": {"path": "/words", "equals": 1}}\n')
    out = tmp_path / "r.jsonl"
    assert batch("measure", "--data", str(data), "--out", str(out)).returncode == 0
    by_id = {r["id"]: r for r in records(out)}
    assert [(v["check"], v["path"]) for v in by_id["plain"]["expect"]] == [("schema", "/length")]
    assert [(v["check"], v["path"]) for v in by_id["own"]["expect"]] == [("equals", "/words")]


@pytest.mark.slow
def test_a_bad_batch_default_is_a_load_error_at_its_line(tmp_path):
    import shutil

    root = tmp_path / "p"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__"))
    tools = root / "tools.yaml"
    tools.write_text(tools.read_text().replace("{path: /length, schema: {type: integer, minimum: 1}}", "[{matches: \"(\"}]"))
    code = "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "validate", str(root)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    line = next(n for n, text in enumerate(tools.read_text().splitlines(), 1) if "expect:" in text)
    assert f"tools.yaml:{line}:" in done.stderr and "batch expectation: matches: not a regular expression" in done.stderr


@pytest.mark.slow
def test_on_a_terminal_progress_is_one_line_redrawn_with_a_bar(tmp_path):
    import pty

    data = write(tmp_path / "c.jsonl", "".join(json.dumps({"text": f"case {i}", "delay": 0.02}) + "\n" for i in range(30)))
    leader, follower = pty.openpty()
    code = "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "batch", "measure", "--data", str(data), "--dir", str(PROJECT),
                             "--no-store", "--concurrency", "2"], stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=60) == 0
    os.close(leader)
    screen = b"".join(chunks).decode()
    redraws = screen.count("\r\x1b[2K")
    assert 2 <= redraws <= 30  # redrawn in place, at most ten times a second (and at the end)
    assert "█" * 20 + " 30/30 · ok 30 · failed 0" in screen
    assert "ETA" in screen and "cases        30" in screen

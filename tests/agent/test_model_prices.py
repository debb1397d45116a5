"""Model prices (config/models.yaml `prices:`) and the cost they give each model answer.

Prices load and are checked at their line; a prompt skill on the mock model with prices
gets `usage.cost_usd` in its events, the stored run, `runs show`, and a `skillyard batch`
summary and results file (real subprocesses, real SQLite); an agent run against loopback
OpenAI- and Anthropic-compatible servers (the real `openai` client) costs tokens × price.
Without prices, no `cost_usd` key appears anywhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import engine
from engine import ConfigError, Engine
from engine.providers.base import Usage
from engine.providers.pricing import format_usd, priced
from engine.runtime.agent import AgentLimits
from engine.spec.models import PricesSpec
from engine.store import open_store
from fake_llm_servers import WIRES, FakeServer, call, write_project

PRICES = {"input": 2.5, "output": 10}  # USD per million tokens

TOOLS = """
tools:
  summarize:
    description: Summarise a text.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    workflow: summarize
    batch:
      expect: {judge: grade}
"""
SKILLS = """
skills:
  summarize:
    kind: prompt
    system: You summarise texts.
    user: "Summarise: {{ text }}"
    input: {type: object, properties: {text: {type: string}}, required: [text]}
    output: {type: object, properties: {summary: {type: string}}, required: [summary]}
  grade:
    kind: prompt
    user: "Is {{ output.summary }} a fair summary of case {{ case.id }}?"
    input: {type: object, properties: {case: {type: object}, output: {type: object}}, required: [case, output]}
    output:
      type: object
      properties: {pass: {type: boolean}, reason: {type: string}}
      required: [pass, reason]
"""
WORKFLOWS = """
workflows:
  summarize:
    steps:
      - {id: s, skill: summarize, input: {text: $toolArgs.text}}
"""


def models_yaml(prices: dict[str, Any] | None) -> str:
    priced_line = f"\n    prices: {json.dumps(prices)}" if prices is not None else ""
    return f"default: m\nmodels:\n  m:\n    provider: mock{priced_line}\n"


@pytest.fixture
def project(write_yaml_project: Any) -> Any:
    def make(prices: dict[str, Any] | None = PRICES) -> Path:
        return write_yaml_project({"tools.yaml": TOOLS, "skills.yaml": SKILLS, "workflows.yaml": WORKFLOWS,
                                   "config/models.yaml": models_yaml(prices)})
    return make


def cli(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))"
    where = [str(root)] if argv[0] == "validate" else ["--dir", str(root)]
    return subprocess.run([sys.executable, "-c", code, *argv, *where], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "NO_COLOR": "1"})


def cost_of(usage: dict[str, Any], prices: dict[str, float] = PRICES) -> float:
    return (usage["input_tokens"] * prices["input"] + usage["output_tokens"] * prices["output"]) / 1_000_000


# ─── loading ────────────────────────────────────────────────────────────────────────────


def test_prices_load_into_the_model_spec(project: Any) -> None:
    loaded = engine.load_project(project())
    assert loaded.models["m"].prices == PricesSpec(input=2.5, output=10.0)
    assert engine.load_project(project(None)).models["m"].prices is None


@pytest.mark.slow
@pytest.mark.parametrize("prices, column, message", [
    ("{input: -1, output: 0.6}", 21, "-1 is not a price; write a number ≥ 0, in USD per million tokens"),
    ('{input: "0.15", output: 0.6}', 21, "'0.15' is not a price"),
    ("{input: 0.1, output: .inf}", 34, "inf is not a price"),
    ("{input: true, output: 1}", 21, "True is not a price"),
    ("{input: 0.15}", 5, "missing required field 'prices.output'"),
    ("{input: 0.1, output: 1, cached: 1}", 37, "unknown field 'prices.cached'"),
])
def test_a_bad_price_is_a_load_error_at_its_line(write_yaml_project: Any, prices: str, column: int, message: str) -> None:
    root = write_yaml_project({"tools.yaml": TOOLS, "skills.yaml": SKILLS, "workflows.yaml": WORKFLOWS,
                               "config/models.yaml": f"default: m\nmodels:\n  m:\n    provider: mock\n    prices: {prices}\n"})
    with pytest.raises(ConfigError) as caught:
        engine.load_project(root)
    (issue,) = caught.value.issues
    assert str(issue.location) == f"config/models.yaml:5:{column}" and message in issue.message, str(issue)
    assert issue.hint
    done = cli(root, "validate")
    assert done.returncode == 2 and f"config/models.yaml:5:{column}: " in done.stderr and "Traceback" not in done.stderr


# ─── the arithmetic ─────────────────────────────────────────────────────────────────────


def test_cost_is_tokens_times_price_and_adds_up_only_where_known() -> None:
    prices = PricesSpec(input=0.15, output=0.6)
    one = priced(Usage(1000, 500), prices)
    assert one.cost_usd == pytest.approx(0.00045)
    unpriced = Usage(10, 5)
    assert priced(unpriced, None) is unpriced and priced(Usage(), prices).cost_usd is None  # no usage: no claim of $0
    assert (unpriced + Usage(1, 1)).cost_usd is None
    assert (one + unpriced).cost_usd == pytest.approx(0.00045) and (unpriced + one + one).cost_usd == pytest.approx(0.0009)
    assert unpriced.as_dict() == {"input_tokens": 10, "output_tokens": 5}
    assert one.as_dict() == {"input_tokens": 1000, "output_tokens": 500, "cost_usd": 0.00045}
    assert [format_usd(c) for c in (0.0000075, 0.0123, 0.1, 12.345)] == ["$0.0000075", "$0.0123", "$0.10", "$12.35"]


# ─── a prompt skill on the mock model ───────────────────────────────────────────────────


@pytest.mark.slow
def test_a_prompt_skill_s_cost_is_in_its_events_the_stored_run_and_runs_show(project: Any) -> None:
    root = project()
    done = cli(root, "call", "summarize", "--arg", "text=The quick brown fox jumps over the lazy dog.",
               "--output", "events", "--quiet")
    assert done.returncode == 0, done.stderr
    *events, final = [json.loads(line) for line in done.stdout.splitlines()]  # the events, then the result
    (exchange,) = [e["data"] for e in events if e["type"] == "model_exchange"]
    usage = exchange["usage"]
    assert usage["input_tokens"] > 0 and usage["cost_usd"] == pytest.approx(cost_of(usage))
    (result,) = [e for e in events if e["type"] == "tool_call_result"]
    assert result["data"]["metadata"]["usage"] == usage == final["metadata"]["usage"]  # one answer: the call's usage is its
    run_id = result["run_id"]
    with open_store(root / ".skillyard" / "runs.db") as store:
        record = store.run(run_id)
    assert record is not None and record.usage == usage
    shown = cli(root, "runs", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert (f"  usage: {usage['input_tokens']} input + {usage['output_tokens']} output tokens · "
            f"{format_usd(usage['cost_usd'])}") in shown.stdout.splitlines()
    verbose = cli(root, "call", "summarize", "--arg", "text=The quick brown fox jumps over the lazy dog.", "--verbose")
    assert f"{usage['input_tokens'] + usage['output_tokens']} tokens ({format_usd(usage['cost_usd'])})" in verbose.stderr


@pytest.mark.slow
def test_a_batch_shows_the_cost_of_its_cases_and_judges_and_compare_names_a_cost_change(project: Any, tmp_path: Path) -> None:
    root = project()
    data = tmp_path / "cases.jsonl"
    data.write_text('{"id": "a", "arguments": {"text": "one two three four"}}\n{"id": "b", "arguments": {"text": "five six"}}\n')
    out = tmp_path / "results.jsonl"
    done = cli(root, "batch", "summarize", "--data", str(data), "--out", str(out), "--no-store")
    assert done.returncode in (0, 1), done.stderr  # the mock judge's verdict is its own business
    records = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["id"])
    assert [r["id"] for r in records] == ["a", "b"]
    total = 0.0
    for record in records:
        for key in ("usage", "judge_usage"):
            usage = record[key]
            assert usage["cost_usd"] == pytest.approx(cost_of(usage)), (key, usage)
            total += usage["cost_usd"]
    tokens_in = sum(r[k]["input_tokens"] for r in records for k in ("usage", "judge_usage"))
    tokens_out = sum(r[k]["output_tokens"] for r in records for k in ("usage", "judge_usage"))
    assert f"tokens       {tokens_in} in · {tokens_out} out · {format_usd(total)}" in done.stderr.splitlines()

    dearer = project({"input": 5, "output": 20})  # the same project, prices doubled
    after = tmp_path / "after.jsonl"
    cli(dearer, "batch", "summarize", "--data", str(data), "--out", str(after), "--no-store")
    compared = cli(root, "batch", "compare", str(out), str(after))
    first = records[0]["usage"]["cost_usd"] + records[0]["judge_usage"]["cost_usd"]
    assert f"a: cost {format_usd(first)} → {format_usd(2 * first)}" in compared.stdout + compared.stderr


@pytest.mark.slow
def test_without_prices_no_cost_key_appears_anywhere(project: Any, tmp_path: Path) -> None:
    root = project(None)
    done = cli(root, "call", "summarize", "--arg", "text=hello world", "--output", "events", "--quiet")
    assert done.returncode == 0, done.stderr
    *events, final = [json.loads(line) for line in done.stdout.splitlines()]
    assert final["metadata"]["usage"]["input_tokens"] > 0
    assert [e["data"]["usage"] for e in events if e["type"] == "model_exchange"][0]["input_tokens"] > 0
    assert "cost" not in done.stdout
    run_id = events[-1]["run_id"]
    with open_store(root / ".skillyard" / "runs.db") as store:
        assert set(store.run(run_id).usage) == {"input_tokens", "output_tokens"}
        assert "cost" not in json.dumps(store.events(run_id))
    shown = cli(root, "runs", "show", run_id)
    assert "usage:" in shown.stdout and "$" not in shown.stdout
    data = tmp_path / "cases.jsonl"
    data.write_text('{"text": "one two"}\n')
    out = tmp_path / "results.jsonl"
    batch = cli(root, "batch", "summarize", "--data", str(data), "--out", str(out), "--no-store")
    assert "cost" not in out.read_text() and "tokens " in batch.stderr and "$" not in batch.stderr


# ─── the agent on real HTTP (the real `openai` client; Anthropic's Messages API) ────────


@pytest.mark.parametrize("wire_name", sorted(WIRES))
def test_an_agent_run_costs_its_reported_tokens_times_the_prices(tmp_path: Path, wire_name: str) -> None:
    wire = WIRES[wire_name]
    prices = {"input": 0.15, "output": 0.6}
    with FakeServer() as server:
        server.script(wire.reply(calls=[call("c1", "echo", {"name": "Ada"})], usage=(1200, 40)),
                      wire.reply("Hello, Ada.", usage=(1300, 25)))
        root = write_project(tmp_path / "project", {"fake": wire.model_entry(server.url, prices=prices)})
        events: list[Any] = []
        agent = Engine.from_dir(root).agent("fake", limits=AgentLimits(total_timeout=10))
        result = asyncio.run(asyncio.wait_for(agent.run("greet Ada", on_event=events.append), 20))
    assert result.stop_reason == "answer" and (result.usage.input_tokens, result.usage.output_tokens) == (2500, 65)
    expected = (2500 * 0.15 + 65 * 0.6) / 1_000_000
    assert result.usage.cost_usd == pytest.approx(expected)
    done = events[-1]
    assert done.type == "agent_done" and done.data["usage"] == {"input_tokens": 2500, "output_tokens": 65,
                                                                 "cost_usd": pytest.approx(expected)}
    assert result.to_dict()["usage"]["cost_usd"] == pytest.approx(expected)


def test_an_agent_run_without_prices_has_no_cost(tmp_path: Path) -> None:
    wire = WIRES["openai"]
    with FakeServer() as server:
        server.script(wire.reply("Hi.", usage=(100, 5)))
        root = write_project(tmp_path / "project", {"fake": wire.model_entry(server.url)})
        events: list[Any] = []
        agent = Engine.from_dir(root).agent("fake", limits=AgentLimits(total_timeout=10))
        result = asyncio.run(asyncio.wait_for(agent.run("hi", on_event=events.append), 20))
    assert result.usage == Usage(100, 5) and events[-1].data["usage"] == {"input_tokens": 100, "output_tokens": 5}
    assert "cost" not in json.dumps([e.data for e in events], default=str)


@pytest.mark.slow
def test_skillyard_chat_s_last_line_says_what_the_run_cost(tmp_path: Path) -> None:
    wire = WIRES["openai"]
    with FakeServer() as server:
        server.script(wire.reply("Hi.", usage=(2000, 100)))
        root = write_project(tmp_path / "project", {"fake": wire.model_entry(server.url, prices={"input": 1, "output": 4})})
        done = cli(root, "chat", "hello")
    assert done.returncode == 0, done.stderr
    assert "after 1 model call(s), 2,100 tokens ($0.0024)," in done.stderr  # (2000 × 1 + 100 × 4) / 1e6

"""The web page in headless Chromium: broken tools shown with their problems and the admin's
"Reload project" button (issue 16 §3), and the Batches view (issue 15 "Where it shows"): a
real batch run by `skillyard batch` against the served project's store, its cases, and a
case's run timeline. Real `skillyard serve` processes on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

import httpx  # noqa: E402

from server_helpers import ServerProcess, running_server  # noqa: E402
from test_web_page import no_horizontal_scroll  # noqa: E402
from test_web_ui import CHROMIUM, browser  # noqa: E402,F401 - browser: one Chromium per module
from web_page_project import write_page_project  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")]  # Chromium (and a served process)

CALLER, ADMIN = "key-caller-7f3a9c21d0", "key-admin-52be81c4aa"
KEYS = f"alice:caller:{CALLER},ops:admin:{ADMIN}"
BRIEF_TYPO = ("topic: $toolArgs.topic}\n      - id: brief", "topic: $toolArgs.topcs}\n      - id: brief")
REPORT_TYPO = ("title: $toolArgs.title,", "title: $toolArgs.titel,")


def open_page(browser: Any, url: str, width: int = 1280) -> tuple[Any, Any, list[str]]:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text)  # an HTTP error status the page reports is not one
            if message.type == "error" and not message.text.startswith("Failed to load resource") else None)
    page.goto(f"{url}/")
    page.wait_for_selector("body[data-ready=true]", timeout=15000)
    return context, page, errors


def replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


# ─── issue 16 §3: broken tools, the reload button ─────────────────────────────────────────


@pytest.fixture(scope="module")
def broken_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    """The page project with a typo in `brief`'s workflow: the server starts, `brief` is broken."""
    root = write_page_project(tmp_path_factory.mktemp("broken"))
    replace(root / "workflows.yaml", *BRIEF_TYPO)
    with running_server(root, keys=KEYS) as process:
        yield process, root


def use_key(page: Any, key: str, role: str) -> None:
    page.fill("#api-key", key)
    page.click("#auth-form button[type=submit]")
    page.wait_for_function("role => document.querySelector('#role-badge').textContent === role", arg=role, timeout=10000)
    page.wait_for_selector("#tool-list li[data-tool=report]", timeout=10000)


def problems(page: Any) -> list[str]:
    return page.eval_on_selector_all("#tool-problems li", "l => l.map(x => x.innerText)")


def test_broken_tools_are_marked_and_the_admin_reloads_the_project(browser: Any, broken_server: tuple[ServerProcess, Path]) -> None:
    server, root = broken_server
    workflows, tools = root / "workflows.yaml", root / "tools.yaml"
    clean_workflows, clean_tools = workflows.read_text().replace(BRIEF_TYPO[1], BRIEF_TYPO[0]), tools.read_text()
    listed = httpx.get(f"{server.url}/v1/tools/broken", headers={"Authorization": f"Bearer {CALLER}"}).json()
    assert [(t["name"], t["serving"]) for t in listed] == [("brief", False)] and "topcs" in listed[0]["problems"][0]
    context, page, errors = open_page(browser, server.url)
    try:
        # a caller: the broken tool is listed and explained, with no form; no reload button
        use_key(page, CALLER, "caller")
        assert page.is_hidden("#reload-project")
        assert page.get_attribute("#tool-list li[data-tool=brief]", "data-broken") == "down"
        assert "broken · 1 problem" in page.inner_text("#tool-list li[data-tool=brief]")
        page.click("#tool-list li[data-tool=brief]")
        (problem,) = problems(page)
        assert problem.startswith("workflows.yaml:11:24 $toolArgs.topcs: tool 'brief' declares no parameter 'topcs'")
        assert "fix: declare 'topcs' under the tool's parameters.properties" in problem
        assert page.is_hidden("#tool-runner") and page.is_hidden("#run-tool")
        page.click("#tool-list li[data-tool=report]")  # a healthy tool: no problems, a form
        assert page.is_hidden("#tool-broken") and page.is_visible("#run-tool")

        # an admin: break `report` in the files, reload: marked broken, still runs its last good version
        use_key(page, ADMIN, "admin")
        assert page.is_visible("#reload-project")
        assert page.locator("#tool-list li[data-tool=brief] input.switch").count() == 0  # nothing to enable
        replace(workflows, *REPORT_TYPO)
        page.click("#reload-project")
        page.wait_for_selector("#reload-result[data-outcome=degraded]", timeout=15000)
        assert "Broken now: brief (1 problem), report (1 problem)" in page.inner_text("#reload-result")
        page.wait_for_selector("#tool-list li[data-tool=report][data-broken=serving]", timeout=10000)
        page.click("#tool-list li[data-tool=report]")
        (problem,) = problems(page)
        assert problem.startswith("workflows.yaml:") and "titel" in problem and "fix: " in problem
        assert "last good version" in page.inner_text("#tool-broken-note")
        page.fill("[name=title]", "still served")
        page.fill("[name=body]", "the last good version")
        page.click("#run-tool")
        page.wait_for_selector("#tool-timeline[data-last-type=tool_call_result]", timeout=15000)

        # a project-wide problem: the reload is refused, the running project stays
        tools.write_text("tools: [\n" + clean_tools)
        page.click("#reload-project")
        page.wait_for_selector("#reload-result[data-outcome=failed]", timeout=15000)
        failed = page.inner_text("#reload-result")
        assert "Reload failed" in failed and "tools.yaml:" in failed and "fix: the list opened with `[` at line 1:8 is not closed" in failed
        assert page.get_attribute("#tool-list li[data-tool=report]", "data-broken") == "serving"
        page.set_viewport_size({"width": 420, "height": 800})  # the problems and the outcome fit a narrow screen
        page.click("#tool-list li[data-tool=brief]")
        no_horizontal_scroll(page, "a broken tool after a refused reload")
        page.set_viewport_size({"width": 1280, "height": 900})

        # fixed files, reload: every tool links; the detail of the open tool follows
        tools.write_text(clean_tools)
        workflows.write_text(clean_workflows)
        page.click("#tool-list li[data-tool=brief]")
        assert page.is_hidden("#tool-runner")
        page.click("#reload-project")
        page.wait_for_selector("#reload-result[data-outcome=ok]", timeout=15000)
        assert "Every tool links." in page.inner_text("#reload-result")
        page.wait_for_selector("#tool-list li[data-tool=brief]:not([data-broken])", timeout=10000)
        page.wait_for_selector("#run-tool", state="visible", timeout=10000)  # the open tool got its form
        assert page.is_hidden("#tool-broken") and page.locator("#tool-list li.broken").count() == 0
        page.fill("[name=topic]", "reloading")
        page.click("#run-tool")
        page.wait_for_selector("#tool-timeline[data-last-type=tool_call_result]", timeout=15000)
        assert httpx.get(f"{server.url}/readyz").json()["status"] == "ready"
        assert not errors, errors
    finally:
        tools.write_text(clean_tools)
        workflows.write_text(clean_workflows)
        context.close()


# ─── issue 15: the Batches view ───────────────────────────────────────────────────────────


def run_batch(root: Path, tool: str, cases: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """`skillyard batch` as a user runs it, on the project's own store; returns the results by case id."""
    data, out = root / f"{name}.jsonl", root / f"{name}-results.jsonl"
    data.write_text("".join(json.dumps(case) + "\n" for case in cases))
    code = "import sys; from engine.cli.main import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, "batch", tool, "--data", str(data), "--out", str(out), "--dir", str(root)],
                          capture_output=True, text=True, timeout=120, cwd=root, env={**os.environ, "SKILLYARD_STORE_URL": ""})
    assert done.returncode in (0, 1), done.stderr
    return {line["id"]: line for line in map(json.loads, out.read_text().splitlines())}


REPORT_CASES = [
    {"id": "c1", "arguments": {"title": "Alpha", "body": "first"}, "expect": {"contains": "# Alpha"}},
    {"id": "c2", "arguments": {"title": "Beta", "body": "second"}, "expect": {"contains": "Gamma"}},
    {"id": "c3", "arguments": {"title": "no body"}, "expect": {"error": "invalid_arguments"}},
]


@pytest.fixture(scope="module")
def batch_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path, dict[str, Any]]]:
    root = write_page_project(tmp_path_factory.mktemp("batches"))
    results = run_batch(root, "report", REPORT_CASES, "report")  # before the server starts
    with running_server(root, keys=None) as process:  # loopback, no keys: admin (sees the CLI's batches)
        yield process, root, results


def test_the_batches_view_lists_batches_and_opens_a_case_s_run(browser: Any, batch_server: tuple[ServerProcess, Path, dict[str, Any]]) -> None:
    server, root, results = batch_server
    batch_id = results["c1"]["batch_id"]
    context, page, errors = open_page(browser, server.url)
    try:
        page.click(".tab[data-view=batches]")
        row = f"#batches-body tr[data-batch-id='{batch_id}']"
        page.wait_for_selector(row, timeout=10000)
        cells = page.eval_on_selector_all(f"{row} td", "l => l.map(x => x.textContent)")
        assert cells[1:] == ["report", "3", "2 · 67 %", "1", "done"], cells

        # a batch recorded while the server runs shows on refresh, newest first
        later = run_batch(root, "triage", [{"id": "t1", "arguments": {"text": "broken button\nlove it"}},
                                                  {"id": "t2", "arguments": {"text": "FAIL only"}, "expect": {"contains": "1 items"}}], "triage")
        page.click("#batches-refresh")
        page.wait_for_function("() => document.querySelectorAll('#batches-body tr[data-batch-id]').length === 2", timeout=10000)
        assert page.eval_on_selector_all("#batches-body tr[data-batch-id]", "l => l.map(x => x.dataset.batchId)") == [
            later["t1"]["batch_id"], batch_id]

        page.click(row)
        page.wait_for_selector("#batch-cases tr[data-case-id=c3]", timeout=10000)
        assert page.url.endswith(f"#batches/{batch_id}") and page.inner_text("#batch-title") == batch_id
        assert "report · done · 3 of 3 cases ran, 2 ok, 2 passed (67 %)" in page.inner_text("#batch-meta")
        cases = page.eval_on_selector_all("#batch-cases tr", "l => l.map(r => [...r.cells].map(c => c.textContent))")
        assert [c[:3] for c in cases] == [["c1", "ok", ""], ["c2", "ok", ""], ["c3", "failed, as expected", "invalid_arguments"]]
        verdicts = [c[3] for c in cases]  # each verdict as the store kept it
        assert verdicts[0].startswith("✓ contains") and verdicts[1].startswith("✗ contains") and "Gamma" in verdicts[1]
        assert verdicts[2].startswith("✓ error") and "invalid_arguments" in verdicts[2]
        assert all(c[4].endswith(" ms") or c[4].endswith(" s") for c in cases), cases

        page.click("#batch-cases tr[data-case-id=c2]")  # the case's run timeline
        run_id = results["c2"]["run_id"]
        page.wait_for_function("id => document.querySelector('#run-title').textContent === id", arg=run_id, timeout=10000)
        page.wait_for_selector("#run-timeline[data-last-type=tool_call_result]", timeout=10000)
        assert "Beta" in page.text_content("#run-timeline")  # the arguments, folded
        page.go_back()  # back to the batch
        page.wait_for_selector("#batch-cases tr[data-case-id=c1]", timeout=10000)
        assert page.is_visible("#view-batches") and page.is_hidden("#view-runs")

        page.set_viewport_size({"width": 420, "height": 800})  # narrow: the batch and the list still fit
        no_horizontal_scroll(page, "a batch")
        page.click(".tab[data-view=batches]")
        assert page.is_hidden("#batch-detail")
        no_horizontal_scroll(page, "batches")
        assert not errors, errors
    finally:
        context.close()


def test_a_case_s_recorded_verdicts_are_listed(browser: Any, batch_server: tuple[ServerProcess, Path, dict[str, Any]]) -> None:
    """When a batch's cases carry their expectation verdicts (the results line's `expect`), each is listed."""
    server, _, _ = batch_server
    body = {"id": "batch_verdicts", "tool": "report", "principal": None, "status": "done", "started_at": 1764440000000,
            "finished_at": 1764440001000, "total": 1, "data_file": "cases.jsonl", "ran": 1, "ok": 1, "passed": 0, "pass_rate": 0,
            "cases": [{"id": "v1", "run_id": "run_v1", "ok": True, "passed": False, "status": "ok", "error_code": None,
                       "duration_ms": 12, "expect": [
                           {"check": "equals", "path": "/stats/words", "ok": True, "message": "equal"},
                           {"check": "contains", "ok": False, "message": "'<b>x</b>' does not contain 'y'"}]}]}
    context, page, errors = open_page(browser, server.url)
    try:
        page.route("**/v1/batches/batch_verdicts", lambda route: route.fulfill(status=200, content_type="application/json", body=json.dumps(body)))
        page.goto(f"{server.url}/#batches/batch_verdicts")
        page.wait_for_selector("#batch-cases tr[data-case-id=v1] .verdicts li", timeout=10000)
        assert page.eval_on_selector_all("#batch-cases .verdicts li", "l => l.map(x => [x.textContent, x.className])") == [
            ["✓ equals /stats/words: equal", "st-ok"], ["✗ contains: '<b>x</b>' does not contain 'y'", "st-error"]]
        assert page.locator("#batch-cases b").count() == 0  # server text stays text
        assert not errors, errors
    finally:
        context.close()

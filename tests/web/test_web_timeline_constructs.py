"""The web page's run timeline for sub-workflows (issue 14, "Events and front doors"), in
headless Chromium against a real `skillyard serve`: a forEach over a sub-workflow shows each
item with its own sub-workflow steps nested under it (12 items, 2 failing, onItemError:
collect; folded past the tenth, the folded failure listed and openable), a plain `workflow:`
step shows its sub-workflow's steps under it, parallel members are marked, the live run and
the stored one render alike, at 1280 and 420 px, with no errors in the page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

import httpx  # noqa: E402

from server_helpers import ServerProcess, running_server  # noqa: E402
from test_web_ui import ARGS, CHROMIUM  # noqa: E402
from web_page_project import DIGEST_FAILING, DIGEST_LINES, digest_text, write_digest_project  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")]  # Chromium (and a served process)

SHOWN_FAILED, FOLDED_FAILED = DIGEST_FAILING


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = write_digest_project(tmp_path_factory.mktemp("digest"))
    with running_server(root, keys=None) as process:  # loopback, no keys: admin
        yield process


@pytest.fixture(scope="module")
def shared(server: ServerProcess) -> Iterator[tuple[Any, list[str]]]:
    """One browser page for the module; page errors and console errors both count."""
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        try:
            yield page, errors
        finally:
            browser.close()


@pytest.fixture
def page(shared: tuple[Any, list[str]], server: ServerProcess, request: pytest.FixtureRequest) -> Iterator[Any]:
    page, errors = shared
    errors.clear()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{server.url}/?test={request.node.name}")
    page.wait_for_selector("body[data-ready=true]", timeout=15000)
    yield page
    assert not errors, errors


def run_digest(page: Any) -> str:
    page.click("#tool-list li[data-tool=digest]")
    page.fill("[name=text]", digest_text())
    page.click("#run-tool")
    page.wait_for_selector("#tool-timeline[data-last-type=tool_call_result]", timeout=20000)
    return "#tool-timeline"


def open_stored_run(page: Any, server: ServerProcess) -> str:
    answer = httpx.post(f"{server.url}/v1/tools/digest/call", json={"text": digest_text()},
                        headers={"Accept": "application/json"}, timeout=30)
    assert answer.status_code == 200, answer.text
    run_id = answer.headers.get("X-Run-Id") or httpx.get(f"{server.url}/v1/runs?limit=1").json()[0]["id"]
    page.goto(f"{server.url}/#runs/{run_id}")
    page.wait_for_selector("#run-timeline[data-last-type=tool_call_result]", timeout=10000)
    return "#run-timeline"


def ids_and_statuses(page: Any, selector: str) -> list[list[str]]:
    return page.eval_on_selector_all(selector, "l => l.map(s => [s.dataset.stepId ?? s.dataset.itemIndex, s.dataset.status])")


def check_digest(page: Any, t: str) -> None:
    """What the run of `digest` must look like, live or stored."""
    assert ids_and_statuses(page, f"{t} .call > .steps > .step") == [
        ["split", "ok"], ["each", "ok"], ["wrap", "ok"], ["stats", "ok"]]

    each = f"{t} .call > .steps > .step[data-step-id=each]"
    assert page.inner_text(f"{each} > .head strong") == "2/4 each"
    assert page.inner_text(f"{each} > .head .muted") == "workflow perLine"
    assert page.text_content(f"{each} > .head .items-count") == f"{DIGEST_LINES} / {DIGEST_LINES} items"
    assert page.eval_on_selector_all(f"{each} > .sub-steps", "l => l.length") == 0  # the items' steps are not the step's own
    shown = ids_and_statuses(page, f"{each} > .items > .item")
    assert shown == [[str(i), "error" if i == SHOWN_FAILED else "ok"] for i in range(10)]
    folded = f"{each} > details.more-items"
    assert ids_and_statuses(page, f"{folded} > .item") == [["10", "ok"], ["11", "error"]]
    assert page.inner_text(f"{folded} > summary") == "… 2 more items: 1 ok, 1 failed"
    assert page.eval_on_selector_all(f"{each} > .failed-items > button", "l => l.map(b => b.textContent)") == [f"#{FOLDED_FAILED}"]

    for index in (0, 7, 10):  # an item that went well: its sub-workflow's two steps, under it and only there
        item = f"{each} .item[data-item-index='{index}']"
        assert page.text_content(f"{item} > .head strong") == f"item {index}"
        assert re.fullmatch(r"\d+ ms", page.text_content(f"{item} > .head .dur"))  # from its sub-workflow's start to its end
        assert page.text_content(f"{item} > .head .muted") == "workflow perLine"
        assert ids_and_statuses(page, f"{item} > .sub-steps > .step") == [["each/check", "ok"], ["each/say", "ok"]]
        assert page.text_content(f"{item} > .sub-steps > .step[data-step-id='each/check'] > .head strong") == "1/2 check"
        assert f"LINE {index}" in page.text_content(f"{item} .step[data-step-id='each/check'] > .log")
        assert set(re.findall(r"LINE (\d+)", page.text_content(item))) == {str(index)}  # this item's line, no other's
        assert page.eval_on_selector_all(f"{item} .step[data-step-id='each/say'] details.exchange-box", "l => l.length") == 1
        assert "in /" in page.text_content(f"{item} > .head .usage")  # its model usage counts for the item
    for index in DIGEST_FAILING:  # a failed item: the step that failed, the message, no step after it
        item = f"{each} .item[data-item-index='{index}']"
        assert ids_and_statuses(page, f"{item} > .sub-steps > .step") == [["each/check", "error"]]
        assert f"cannot check line {index}" in page.text_content(f"{item} .step[data-step-id='each/check'] .err-text")
    call_log = page.text_content(f"{t} .call > .log")
    assert "perLine" not in call_log and "wrapUp" not in call_log  # sub-workflows' prepared/done: not in the call's log

    wrap = f"{t} .call > .steps > .step[data-step-id=wrap]"  # a plain workflow step, and a parallel member
    assert page.inner_text(f"{wrap} > .head .muted") == "workflow wrapUp"
    assert ids_and_statuses(page, f"{wrap} > .sub-steps > .step") == [["wrap/count", "ok"]]
    assert page.text_content(f"{wrap} > .sub-steps > .step > .head strong") == "1/1 count"
    assert '"failed": 2' in page.text_content(f"{wrap} > .sub-steps > .step > .log")
    marks = page.eval_on_selector_all(f"{t} .step[data-parallel=true] > .head .parallel-mark", "l => l.map(m => m.title)")
    assert marks == ["runs at the same time as stats", "runs at the same time as wrap"]


def test_a_live_run_nests_each_item_s_sub_workflow_and_a_workflow_step_s(page: Any) -> None:
    check_digest(page, run_digest(page))


def test_a_stored_run_renders_the_same(page: Any, server: ServerProcess) -> None:
    check_digest(page, open_stored_run(page, server))


def test_a_folded_failure_opens_from_the_list_of_failed_items(page: Any, server: ServerProcess) -> None:
    t = open_stored_run(page, server)
    each = f"{t} .step[data-step-id=each]"
    failed = f"{each} .item[data-item-index='{FOLDED_FAILED}']"
    assert page.get_attribute(f"{each} > details.more-items", "open") is None and page.is_hidden(failed)
    page.click(f"{each} > .failed-items > button")
    assert page.get_attribute(f"{each} > details.more-items", "open") == ""
    assert page.is_visible(failed) and page.is_visible(f"{failed} .err-text")
    assert page.evaluate("s => { const r = document.querySelector(s).getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight + 1; }", failed)


def test_the_timeline_of_sub_workflows_fits_420_px(page: Any, server: ServerProcess) -> None:
    t = open_stored_run(page, server)
    page.set_viewport_size({"width": 420, "height": 800})
    page.click(f"{t} .step[data-step-id=each] > .failed-items > button")
    page.click(f"{t} .item[data-item-index='0'] .step[data-step-id='each/say'] details.exchange-box > summary")
    widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths
    wide = page.evaluate("""() => [...document.querySelectorAll('main *')]
        .filter(e => e.offsetParent !== null && e.getBoundingClientRect().right > window.innerWidth + 0.5 && !e.closest('.table-wrap, pre'))
        .map(e => e.tagName + '.' + e.className).slice(0, 5)""")
    assert wide == [], wide
    item = page.locator(f"{t} .item[data-item-index='{FOLDED_FAILED}'] > .sub-steps > .step").bounding_box()
    assert item["x"] > 0 and item["x"] + item["width"] <= 420


def test_items_left_out_timed_out_or_nested_read_as_what_happened(page: Any) -> None:
    """Cases a served run rarely shows, fed to the page's Timeline as the engine emits them: an item
    its `when` left out (only item_finished), a sub-workflow item that ended without `done` (a
    timeout), a forEach and a parallel group inside an item's sub-workflow, and the count of items not yet come."""
    result = page.evaluate("""async () => {
        const { Timeline } = await import('/static/timeline.js');
        const root = document.createElement('div');
        document.body.append(root);
        const timeline = new Timeline(root);
        let seq = 0;
        const add = (type, data, step_id) => timeline.add({ type, seq: ++seq, ts: seq, tool_call_id: 'c', step_id, skill: 'k', data });
        const progress = (stage, data) => add('tool_progress_delta', { stage, ...data });
        add('tool_call_start', { tool: 't', arguments: {} });
        progress('step_started', { step: 1, of: 1, step_id: 'each', workflow: 'w', items_total: 14 });
        const pending = root.querySelector('.more-items > summary').textContent;
        progress('item_finished', { step_id: 'each', item_index: 0, items_done: 1, items_total: 14 });
        progress('prepared', { workflow: 'w', step_id: 'each', item_index: 1 });
        progress('step_started', { step: 1, of: 1, step_id: 'each/slow', item_index: 1 });
        add('skill_start', { input: {}, attempt: 1, kind: 'python', item_index: 1 }, 'each/slow');
        progress('item_finished', { step_id: 'each', item_index: 1, items_done: 2, items_total: 14 });
        progress('prepared', { workflow: 'w', step_id: 'each', item_index: 2 });
        progress('step_started', { step: 1, of: 1, step_id: 'each/inner', item_index: 2, items_total: 2 });
        add('skill_start', { input: {}, attempt: 1, kind: 'python', item_index: 1 }, 'each/inner');
        add('skill_error', { code: 'execution_error', message: 'inner 1', will_retry: false, item_index: 1 }, 'each/inner');
        progress('item_finished', { step_id: 'each/inner', item_index: 1, items_done: 1, items_total: 2 });
        progress('step_finished', { step: 1, of: 1, step_id: 'each/inner', item_index: 2 });
        progress('step_started', { step: 2, of: 3, step_id: 'each/a', item_index: 2, parallel: ['each/a', 'each/b'] });
        progress('done', { workflow: 'w', step_id: 'each', item_index: 2 });
        progress('item_finished', { step_id: 'each', item_index: 2, items_done: 3, items_total: 14 });
        progress('item_finished', { step_id: 'each', item_index: 12, items_done: 4, items_total: 14 });
        const status = (s) => [...root.querySelectorAll(s)].map((n) => n.dataset.status);
        const out = {
            pending, folded: root.querySelector('.more-items > summary').textContent,
            items: status('.step[data-step-id=each] > .items > .item'),
            inner: status('.item[data-item-index="2"] > .sub-steps > .step[data-step-id="each/inner"] > .items > .item'),
            innerStep: status('.item[data-item-index="2"] > .sub-steps > .step[data-step-id="each/inner"]'),
            mark: root.querySelector('.item[data-item-index="2"] > .sub-steps > .step[data-step-id="each/a"] .parallel-mark').title,
        };
        root.remove();
        return out;
    }""")
    assert result["pending"] == "… 4 more items: 0 ok, 0 failed, 4 not finished"
    assert result["items"] == ["skipped", "error", "ok"]
    assert result["inner"] == ["error"] and result["innerStep"] == ["ok"]  # an inner item's failure stays in its item
    assert result["mark"] == "runs at the same time as b"
    assert result["folded"] == "… 4 more items: 0 ok, 0 failed, 1 skipped, 3 not finished"

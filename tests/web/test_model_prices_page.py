"""The web page (headless Chromium, a real `skillyard serve`) shows the cost that a model's
prices give a run: a prompt skill on the priced mock model, opened from the runs list.
Without prices the same page shows tokens and no dollar figure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

import httpx  # noqa: E402

from server_helpers import running_server  # noqa: E402
from test_model_prices import SKILLS, TOOLS, WORKFLOWS, models_yaml  # noqa: E402
from test_web_ui import CHROMIUM, browser  # noqa: E402,F401 - browser: one Chromium per module

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")]  # Chromium (and a served process)


def page_cost(tmp_path: Path, browser: Any, prices: dict[str, float] | None) -> tuple[dict[str, Any], str, str]:
    """(the run's usage, the page's run header usage, its usage total) of one call of `summarize`."""
    root = tmp_path / "project"
    root.mkdir()
    for name, text in {"tools.yaml": TOOLS, "skills.yaml": SKILLS, "workflows.yaml": WORKFLOWS,
                       "config/models.yaml": models_yaml(prices)}.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(text)
    with running_server(root, keys=None) as server:
        answer = httpx.post(f"{server.url}/v1/tools/summarize/call", json={"text": "A short note."}, timeout=30).json()
        run_id = answer["run_id"]
        usage = httpx.get(f"{server.url}/v1/runs/{run_id}", timeout=10).json()["usage"]
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{server.url}/#runs/{run_id}")
            page.wait_for_selector("#run-timeline[data-last-type=tool_call_result]", timeout=15000)
            head = page.text_content("#run-timeline .call > .head .usage")
            total = page.text_content("#run-timeline .usage-total")
            assert not errors, errors
        finally:
            context.close()
    return usage, head, total


def test_the_page_shows_a_priced_run_s_cost(tmp_path: Path, browser: Any) -> None:
    usage, head, total = page_cost(tmp_path, browser, {"input": 2.5, "output": 10})
    cost = (usage["input_tokens"] * 2.5 + usage["output_tokens"] * 10) / 1_000_000
    assert usage["cost_usd"] == pytest.approx(cost)
    shown = f"{usage['input_tokens']:,} in / {usage['output_tokens']:,} out tokens · ${cost:.4f}"  # the page's format
    assert head == shown and total == f"Model usage: {shown} (1 model answer)"


def test_the_page_shows_no_cost_without_prices(tmp_path: Path, browser: Any) -> None:
    usage, head, total = page_cost(tmp_path, browser, None)
    assert "cost_usd" not in json.dumps(usage)
    assert head == f"{usage['input_tokens']:,} in / {usage['output_tokens']:,} out tokens" and "$" not in total

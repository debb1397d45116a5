"""The web page in headless Chromium: what a new user tripped on (issue 30 §5 "The page").

A long tool name wraps between its words; at 420 px the page speaks of no "left" and the
API-key box shows its whole hint; a forEach step whose item failed is badged as failed; a
form refused before sending leaves no earlier result; agent runs are listed by their prompt;
a batch whose failures were all expected shows nothing failed; the chat renders nested lists
and headings; Markdown strings inside a tool's JSON result are rendered.

One served project (a real `skillyard serve` on 127.0.0.1) and one browser for the module.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("playwright.sync_api")

from server_helpers import ServerProcess, running_server  # noqa: E402
from test_web_batches import run_batch  # noqa: E402
from test_web_ui import CHROMIUM, browser  # noqa: E402,F401 - browser: one Chromium per module

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)")]  # Chromium (and a served process)

LONG = "summarizeCustomerFeedbackAndDraftRepliesForTheSupportTeam"
PROMPT = "Please write a report on this text: the cat sat on the mat, the cat ran"

FILES: dict[str, str] = {
    "tools.yaml": f"""
        tools:
          {LONG}:
            description: Report on a text as Markdown, with its figures.
            workflow: report
            parameters:
              type: object
              properties:
                text: {{type: string, minLength: 1, description: The text}}
              required: [text]
              additionalProperties: false
          triage:
            description: Classify each line; one failing line fails the call.
            workflow: triage
            parameters:
              type: object
              properties:
                lines: {{type: string, description: One item per line}}
              required: [lines]
              additionalProperties: false
    """,
    "skills.yaml": """
        skills:
          report:
            kind: python
            function: fix_skills:report
            input: {type: object, properties: {text: {type: string}}, required: [text]}
          split:
            kind: python
            function: fix_skills:split
            input: {type: object, properties: {text: {type: string}}, required: [text]}
          classify:
            kind: python
            function: fix_skills:classify
            input: {type: object, properties: {text: {type: string}}, required: [text]}
    """,
    "workflows.yaml": """
        workflows:
          report:
            steps:
              - id: report
                skill: report
                input: {text: $toolArgs.text}
          triage:
            steps:
              - id: split
                skill: split
                input: {text: $toolArgs.lines}
              - id: classify
                skill: classify
                forEach: $steps.split.output
                onItemError: fail
                input: {text: $item}
    """,
    "config/models.yaml": """
        default: mock
        models:
          mock: {provider: mock}
    """,
    "config/engine.yaml": """
        store:
          path: .skillyard/runs.db
    """,
    "fix_skills.py": '''
        def report(input):
            words = input["text"].replace(",", " ").split()
            report = "\\n".join(["# Text report", "", "- Words: " + str(len(words)), "- Sentences: 1", "",
                                 "## Top keywords", "1. cat (2)", "2. mat (1)"])
            return {"report": report, "stats": {"words": len(words), "keywords": [{"word": "cat", "count": 2}, {"word": "mat", "count": 1}]}}


        def split(input):
            return [line for line in input["text"].splitlines() if line.strip()]


        def classify(input):
            if "FAIL" in input["text"]:
                raise ValueError("cannot classify " + input["text"])
            return "ok: " + input["text"]
    ''',
}

BATCH = [
    {"id": "b1", "arguments": {"text": "one two"}},
    {"id": "b2", "arguments": {"text": ""}, "expect": {"error": "invalid_arguments"}},  # fails, as it should
    {"id": "b3", "arguments": {"text": "three"}},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("fixes")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    results = run_batch(root, LONG, BATCH, "expected")  # before the server starts, on the same store
    with running_server(root, keys=None) as process:  # loopback, no keys: admin
        yield process, results


@pytest.fixture(scope="module")
def shared(browser: Any) -> Iterator[tuple[Any, list[str]]]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(8000)  # a missing element fails in seconds, not the default 30
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page, errors
    context.close()


@pytest.fixture
def page(shared: tuple[Any, list[str]], served: tuple[ServerProcess, dict[str, Any]], request: pytest.FixtureRequest) -> Iterator[Any]:
    """The shared page freshly loaded at 1280 px."""
    page, errors = shared
    errors.clear()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{served[0].url}/?test={request.node.name}")
    page.wait_for_selector("body[data-ready=true]", timeout=15000)
    yield page
    assert not errors, errors


def pick(page: Any, tool: str) -> None:
    page.click(f"#tool-list li[data-tool={tool}]")
    page.wait_for_function("name => document.querySelector('#tool-title').textContent === name", arg=tool, timeout=5000)


def run_and_wait(page: Any) -> None:
    page.click("#run-tool")
    page.wait_for_selector("#tool-timeline[data-last-type=tool_call_result], #tool-timeline[data-last-type=tool_call_error]", timeout=15000)


# Where each line of an element's text starts, and whether that is between two words of a name
# (camelCase, snake_case, kebab-case, dotted): a break anywhere else cuts a word in two.
LINE_BREAKS = """node => {
  const chars = [];
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
  for (let text = walker.nextNode(); text; text = walker.nextNode()) {
    for (let i = 0; i < text.length; i++) {
      const range = document.createRange();
      range.setStart(text, i); range.setEnd(text, i + 1);
      const rect = range.getClientRects()[0];
      if (rect) chars.push([text.data[i], rect.top]);
    }
  }
  const breaks = [];
  for (let i = 1; i < chars.length; i++) {
    if (chars[i][1] > chars[i - 1][1] + 2) {
      const [a, b] = [chars[i - 1][0], chars[i][0]];
      breaks.push({ at: i, between: a + b, word: /[a-z0-9]/.test(a) && /[A-Z]/.test(b) || /[_.\\-/]/.test(a) });
    }
  }
  return breaks;
}"""


def test_a_long_tool_name_wraps_between_its_words(page: Any) -> None:
    name = page.locator(f"#tool-list li[data-tool={LONG}] .name")
    assert name.text_content() == LONG  # the whole name, as it is (copying it gives it back whole)
    breaks = name.evaluate(LINE_BREAKS)
    assert breaks, "the name fits one line: the test needs a name that wraps"
    assert all(b["word"] for b in breaks), f"a break inside a word: {breaks}"


def test_at_420_px_the_page_points_to_the_list_and_the_key_hint_fits(page: Any) -> None:
    page.set_viewport_size({"width": 420, "height": 800})
    hint = page.locator("#tool-empty")
    assert not hint.is_visible() or "left" not in hint.inner_text(), hint.inner_text()
    if hint.is_visible():  # a hint must not stand above the list it points to
        assert hint.bounding_box()["y"] > page.locator("#tool-list").bounding_box()["y"]
    room = page.eval_on_selector("#api-key", """input => {
      const style = getComputedStyle(input);
      const context = document.createElement("canvas").getContext("2d");
      context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
      const inner = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      return { text: context.measureText(input.placeholder).width, inner };
    }""")
    assert room["text"] <= room["inner"], room
    page.set_viewport_size({"width": 1280, "height": 900})


def test_a_foreach_step_whose_item_failed_is_badged_failed(page: Any) -> None:
    pick(page, "triage")
    page.fill("[name=lines]", "fine\nFAIL here\nalso fine")
    run_and_wait(page)
    step = "#tool-timeline .step[data-step-id=classify]"
    assert page.get_attribute(step, "data-status") == "error"
    assert page.text_content(f"{step} > .head > .status") == "error"
    assert page.get_attribute(f"{step} .item[data-item-index='1']", "data-status") == "error"
    assert page.locator("#tool-timeline [data-status=cancelled]").count() == 0


def test_a_form_refused_before_sending_clears_the_last_result(page: Any) -> None:
    pick(page, LONG)
    page.fill("[name=text]", "the cat sat")
    run_and_wait(page)
    assert page.is_visible("#tool-result-box") and page.inner_text("#tool-status").startswith("done in")
    page.fill("[name=text]", "")
    page.click("#run-tool")
    page.wait_for_selector("#form-error:not([hidden])", timeout=5000)
    assert page.inner_text("#form-error") == "Not sent: text is required."
    assert page.is_hidden("#tool-result-box")
    assert page.inner_text("#tool-status") == ""
    assert page.locator("#tool-timeline > *").count() == 0  # the timeline of the earlier call is gone too


def test_markdown_strings_in_a_json_result_are_rendered(page: Any) -> None:
    pick(page, LONG)
    page.fill("[name=text]", "the cat sat on the mat")
    run_and_wait(page)
    result = "#tool-result"
    assert page.get_attribute(result, "data-kind") == "json"
    assert page.text_content(f"{result} .md h3") == "Text report"
    assert page.text_content(f"{result} .md h4") == "Top keywords"
    assert page.eval_on_selector_all(f"{result} .md ol > li", "l => l.map(x => x.textContent)") == ["cat (2)", "mat (1)"]
    shown = page.inner_text(result)
    assert "\\n" not in shown and "# Text report" not in shown, shown  # no JSON escapes, no literal Markdown
    assert "words" in shown and "6" in shown  # the other fields still shown
    page.click(f"{result} details.raw-json > summary")  # the JSON as it came, one click away
    assert '"report": "# Text report\\n' in page.inner_text(f"{result} details.raw-json pre")


def test_the_chat_renders_nested_lists_and_headings_and_the_run_is_listed_by_its_prompt(page: Any) -> None:
    page.click(".tab[data-view=chat]")
    page.fill("#chat-text", PROMPT)
    page.click("#chat-send")
    page.wait_for_selector("#chat-messages .msg-assistant[data-stop-reason]", timeout=20000)
    answer = "#chat-messages .msg-assistant .md.assistant-text"
    assert page.text_content(f"{answer} h3") == "Text report"
    assert page.text_content(f"{answer} h4") == "Top keywords"
    nested = page.eval_on_selector_all(f"{answer} li > ul > li, {answer} li > ol > li", "l => l.map(x => x.textContent)")
    assert any(x.startswith("words: ") for x in nested) and "word: cat; count: 2" in nested, nested
    text = page.inner_text(answer)
    assert "##" not in text and "\n- " not in text, text  # no literal Markdown left

    page.click(".tab[data-view=runs]")
    row = "#runs-body tr[data-kind=agent]"
    page.wait_for_selector(row, timeout=10000)
    name = page.locator(f"{row} td").nth(2)
    assert name.text_content().startswith(PROMPT[:40]), name.text_content()
    assert page.locator(f"{row} td").nth(2).get_attribute("title").startswith(PROMPT)


def test_a_batch_whose_failures_were_expected_shows_none_failed(page: Any, served: tuple[ServerProcess, dict[str, Any]]) -> None:
    server, results = served
    assert results["b2"]["ok"] is False and results["b2"]["passed"] is True, results["b2"]
    batch_id = results["b1"]["batch_id"]
    page.click(".tab[data-view=batches]")
    row = f"#batches-body tr[data-batch-id='{batch_id}']"
    page.wait_for_selector(row, timeout=10000)
    cells = page.eval_on_selector_all(f"{row} td", "l => l.map(x => [x.textContent, x.className])")
    assert cells[3][0] == "3 · 100 %" and cells[4][0] == "0", cells
    assert "st-error" not in cells[4][1], cells
    page.click(row)
    page.wait_for_selector("#batch-cases tr[data-case-id=b2]", timeout=10000)
    result = page.locator("#batch-cases tr[data-case-id=b2] td").nth(1)
    assert "expected" in result.text_content() and "st-error" not in (result.get_attribute("class") or "")


def test_markdown_nests_lists_and_headings_and_keeps_untrusted_text_as_text(page: Any) -> None:
    """markdown.js alone: an item's indented lines are its blocks; markup stays text; a deep nest cannot exhaust the stack."""
    got = page.evaluate("""async () => {
      const { renderMarkdown } = await import("./static/markdown.js");
      const box = document.createElement("div");
      box.append(renderMarkdown("- a <img src=x onerror=window.__pwned=1>\\n  - b **bold**\\n    1. c\\n\\n    ## <script>window.__pwned=2</script>\\n- d\\n\\n"
        + "- ".repeat(5000) + "deep"));
      document.body.append(box);
      await new Promise((resolve) => setTimeout(resolve, 50));
      return { top: [...box.querySelectorAll(":scope > ul > li")].map((li) => li.firstChild.textContent),
               nested: box.querySelector(":scope > ul > li > ul > li > ol > li")?.textContent, strong: box.querySelector("li strong")?.textContent,
               heading: box.querySelector("li h4")?.textContent, markup: box.querySelectorAll("img, script").length,
               pwned: window.__pwned ?? null, depth: box.querySelectorAll("ul").length, deep: box.textContent.endsWith("deep") };
    }""")
    assert got["top"][:2] == ["a <img src=x onerror=window.__pwned=1>", "d"], got
    assert got["nested"] == "c" and got["strong"] == "bold" and got["heading"] == "<script>window.__pwned=2</script>", got
    assert got["markup"] == 0 and got["pwned"] is None, got
    assert got["deep"] and got["depth"] < 40, got

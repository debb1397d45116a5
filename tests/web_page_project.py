"""The project the web page tests serve (tests/test_web_page*.py), and the synthetic events of
issue 14's workflow constructs that the page must render. (No tests here.)"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

FILES: dict[str, str] = {
    "tools.yaml": """
        tools:
          report:
            description: Render a Markdown report from a title and a text.
            workflow: report
            parameters:
              type: object
              properties:
                title: {type: string, maxLength: 80, description: A short title}
                site: {type: string, format: uri, description: Where the text came from}
                body: {type: string, description: The text of the report}
                draft: {type: boolean, description: Mark the report as a draft}
                level: {enum: [low, high]}
              required: [title, body]
              additionalProperties: false
          brief:
            description: Ask the model for an outline and a brief.
            workflow: brief
            parameters:
              type: object
              properties:
                topic: {type: string, maxLength: 120}
              required: [topic]
              additionalProperties: false
          triage:
            description: Classify each line of a text, count the kinds, note the bugs.
            workflow: triage
            parameters:
              type: object
              properties:
                text: {type: string, description: One item per line}
                includeBugs: {type: boolean, default: false, description: Note the bugs too}
              required: [text]
              additionalProperties: false
          login:
            description: Check a user name and a password.
            workflow: login
            parameters:
              type: object
              properties:
                user: {type: string, maxLength: 60}
                password: {type: string, maxLength: 60}
              required: [user, password]
              additionalProperties: false
    """,
    "skills.yaml": """
        skills:
          report:
            kind: python
            function: page_skills:report
            input:
              type: object
              properties: {title: {type: string}, body: {type: string}, site: {type: string}}
              required: [title, body]
          outline:
            kind: prompt
            system: You outline topics in a few points.
            user: "Outline the topic {{ topic }}."
            input: {type: object, properties: {topic: {type: string}}, required: [topic]}
            output:
              type: object
              properties:
                points: {type: array, items: {type: string}, minItems: 2, description: The main points}
              required: [points]
          brief:
            kind: prompt
            system: You write short briefs.
            user: "Write a brief about {{ topic }}."
            input: {type: object, properties: {topic: {type: string}}, required: [topic]}
          split:
            kind: python
            function: page_skills:split
            input: {type: object, properties: {text: {type: string}}, required: [text]}
            output:
              type: object
              properties:
                items: {type: array, items: {type: object, properties: {text: {type: string}}, required: [text]}}
              required: [items]
          classify:
            kind: python
            function: page_skills:classify
            input: {type: object, properties: {text: {type: string}, position: {type: integer}}, required: [text, position]}
            output:
              type: object
              properties: {kind: {type: string}, summary: {type: string}}
              required: [kind, summary]
          count:
            kind: python
            function: page_skills:count
            input: {type: object, properties: {items: {type: array}}, required: [items]}
            output: {type: object, properties: {total: {type: integer}}, required: [total]}
          note:
            kind: python
            function: page_skills:note
            input: {type: object, properties: {items: {type: array}}, required: [items]}
            output: {type: array, items: {type: string}}
          render:
            kind: python
            function: page_skills:render
            input: {type: object, properties: {stats: {type: object}, bugs: {type: array}}, required: [stats, bugs]}
            output: {type: string}
          login:
            kind: python
            function: page_skills:login
            input: {type: object, properties: {user: {type: string}, password: {type: string}}, required: [user]}
    """,
    "workflows.yaml": """
        workflows:
          report:
            steps:
              - id: report
                skill: report
                input: {title: $toolArgs.title, body: $toolArgs.body, site: $toolArgs.site}
          brief:
            steps:
              - id: outline
                skill: outline
                input: {topic: $toolArgs.topic}
              - id: brief
                skill: brief
                input: {topic: $toolArgs.topic}
            output: $steps.brief.output
          triage:
            steps:
              - id: split
                skill: split
                input: {text: $toolArgs.text}
              - id: classify
                skill: classify
                forEach: $steps.split.output.items
                concurrency: 3
                onItemError: skip
                input: {text: $item.text, position: $index}
              - parallel:
                  - id: stats
                    skill: count
                    input: {items: $steps.classify.output}
                  - id: bugs
                    workflow: noteBugs
                    when: $toolArgs.includeBugs == true
                    input: {items: $steps.classify.output}
              - id: report
                skill: render
                input:
                  stats: $steps.stats.output
                  bugs: $steps.bugs.output ?? []
            output: $steps.report.output
          noteBugs:
            steps:
              - id: note
                skill: note
                input: {items: $toolArgs.items}
          login:
            steps:
              - id: login
                skill: login
                input: {user: $toolArgs.user, password: $toolArgs.password}
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
    "page_skills.py": '''
        def report(input):
            lines = ["# " + input["title"], "", input["body"], "",
                     "- first point with **bold** and *soft* words",
                     "- see [the docs](https://example.com/docs)", "",
                     "```", "x = 1 < 2", "```"]
            if input.get("site"):
                lines += ["", "Source: " + input["site"]]
            return "\\n".join(lines)


        def split(input):
            return {"items": [{"text": line.strip()} for line in input["text"].splitlines() if line.strip()]}


        def classify(input):
            if "FAIL" in input["text"]:
                raise ValueError("cannot classify item " + str(input["position"]))
            kind = "bug" if "broken" in input["text"] else "praise"
            return {"kind": kind, "summary": kind + ": " + input["text"]}


        def count(input):
            return {"total": len(input["items"])}


        def note(input):
            return [item["summary"] for item in input["items"] if item["kind"] == "bug"]


        def render(input):
            bugs = "".join("- " + bug + "\\n" for bug in input["bugs"])
            return "# Triage\\n\\n- " + str(input["stats"]["total"]) + " items\\n" + bugs


        def login(input):
            return {"user": input["user"], "ok": True}
    ''',
}


def write_page_project(root: Path) -> Path:
    for name, text in FILES.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


# ─── issue 14's constructs as the engine emits them (engine/executors/workflow_nodes.py) ──────────────

SYNTHETIC_RUN = "run_synthetic0000000000"
CALL = "call_synthetic000000000"
CONDITION = "$toolArgs.includeBugs == true and len($steps.classify.output) > 0"
ITEMS = 12
FAILED_ITEM = 11  # past the tenth: folded away, counted as failed in the fold's label


class EventLog:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, type_: str, data: dict[str, Any], step_id: str | None = None, skill: str | None = None) -> None:
        event: dict[str, Any] = {"type": type_, "run_id": SYNTHETIC_RUN, "seq": len(self.events) + 1,
                                 "ts": 1764440000000 + 5 * len(self.events), "tool_call_id": CALL}
        if step_id:
            event["step_id"] = step_id
        if skill:
            event["skill"] = skill
        event["data"] = data
        self.events.append(event)

    def progress(self, stage: str, **data: Any) -> None:
        self.emit("tool_progress_delta", {"stage": stage, "message": f"{stage} {data.get('step_id', '')}", **data})

    def skill(self, step_id: str, skill: str, output: Any, item: int | None = None, error: str | None = None) -> None:
        extra = {} if item is None else {"item_index": item}
        self.emit("skill_start", {"input": {"text": f"input of {step_id} {item}"}, "attempt": 1, "kind": "python", **extra}, step_id, skill)
        if error:
            self.emit("skill_error", {"code": "execution_error", "message": error, "attempt": 1, "will_retry": False,
                                      "duration_ms": 1.0, **extra}, step_id, skill)
        else:
            self.emit("skill_result", {"output": output, "duration_ms": 1.0, **extra}, step_id, skill)


def synthetic_events() -> list[dict[str, Any]]:
    """split → classify (forEach over 12 items, onItemError: skip, one fails) → parallel
    [stats, notify] interleaved, bugs skipped by its `when` → report (a sub-workflow step)."""
    log = EventLog()
    log.emit("tool_call_start", {"tool": "triageFeedback", "arguments": {"text": "…", "includeBugs": False}})
    log.progress("matched", executor="workflow")
    log.progress("prepared", workflow="triageFeedback", steps=6)
    log.progress("step_started", step=1, of=6, step_id="split")
    log.skill("split", "splitFeedback", {"items": [{"text": f"feedback {i}"} for i in range(ITEMS)]})
    log.progress("step_finished", step=1, of=6, step_id="split", duration_ms=2.0)
    log.progress("step_started", step=2, of=6, step_id="classify", items_total=ITEMS)
    done = 0
    order = [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10]  # items finish out of order (concurrency 4)
    for index in order:
        failed = index == FAILED_ITEM
        if index == 0:  # a prompt skill's exchange inside an item, with a usage that carries a cost
            log.emit("model_exchange", {"model": "priced", "attempt": 1, "item_index": 0, "output_schema": False,
                                        "messages": [{"role": "user", "content": "Classify: feedback 0"}], "response": "a *bug*",
                                        "usage": {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.0042}},
                     "classify", "classifyOne")
        log.skill("classify", "classifyOne", {"kind": "bug", "summary": f"summary of item {index}"}, item=index,
                  error="the model gave up" if failed else None)
        done += 1
        log.progress("item_finished", step_id="classify", item_index=index, items_done=done, items_total=ITEMS)
    log.progress("step_finished", step=2, of=6, step_id="classify", duration_ms=30.0)
    log.progress("step_started", step=3, of=6, step_id="stats")
    log.progress("step_skipped", step=4, of=6, step_id="bugs", condition=CONDITION)
    log.progress("step_started", step=5, of=6, step_id="notify")
    log.emit("skill_start", {"input": {"n": 1}, "attempt": 1, "kind": "python"}, "stats", "countKinds")
    log.emit("skill_start", {"input": {"n": 2}, "attempt": 1, "kind": "python"}, "notify", "notifyTeam")
    log.emit("skill_result", {"output": {"bug": 11}, "duration_ms": 3.0}, "stats", "countKinds")
    log.emit("skill_result", {"output": "notified **the team**", "duration_ms": 4.0}, "notify", "notifyTeam")
    log.progress("step_finished", step=3, of=6, step_id="stats", duration_ms=3.0)
    log.progress("step_finished", step=5, of=6, step_id="notify", duration_ms=4.0)
    log.progress("step_started", step=6, of=6, step_id="report", workflow="renderTriage")
    log.progress("step_started", step=1, of=1, step_id="report/render")
    log.skill("report/render", "renderTriage", "# Triage\n\n- 11 bugs")
    log.progress("step_finished", step=1, of=1, step_id="report/render", duration_ms=1.0)
    log.progress("step_finished", step=6, of=6, step_id="report", duration_ms=2.0)
    log.progress("done", workflow="triageFeedback")
    log.emit("tool_call_result", {"ok": True, "data": "# Triage\n\n- 11 bugs", "metadata": {"duration_ms": 40.0}})
    return log.events


def synthetic_run() -> dict[str, Any]:
    events = synthetic_events()
    return {"id": SYNTHETIC_RUN, "kind": "tool", "name": "triageFeedback", "status": "ok", "started_at": events[0]["ts"],
            "finished_at": events[-1]["ts"], "input": {"text": "…", "includeBugs": False}, "output": "# Triage",
            "error": None, "usage": None, "parent_run_id": None, "principal": "local", "duration_ms": 100,
            "live": False, "pending_approvals": [], "tool_calls": [], "last_seq": None}


def as_sse(events: list[dict[str, Any]]) -> str:
    return "".join(f"id: {e['seq']}\nevent: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


# ─── a project of sub-workflows (tests/web/test_web_timeline_constructs.py) ────────────────────

DIGEST_LINES = 12
DIGEST_FAILING = (3, 11)  # one item shown one by one, one folded past the tenth

DIGEST_FILES: dict[str, str] = {
    "tools.yaml": """
        tools:
          digest:
            description: Check each line of a text with a sub-workflow, then wrap up.
            workflow: digest
            parameters:
              type: object
              properties:
                text: {type: string, description: One item per line}
              required: [text]
              additionalProperties: false
    """,
    "skills.yaml": """
        skills:
          lines:
            kind: python
            function: digest_skills:lines
            input: {type: object, properties: {text: {type: string}}, required: [text]}
            output:
              type: object
              properties:
                items: {type: array, items: {type: object, properties: {text: {type: string}}, required: [text]}}
              required: [items]
          check:
            kind: python
            function: digest_skills:check
            input: {type: object, properties: {text: {type: string}, position: {type: integer}}, required: [text, position]}
            output: {type: object, properties: {text: {type: string}}, required: [text]}
          say:
            kind: prompt
            user: "Say {{ text }} back."
            input: {type: object, properties: {text: {type: string}}, required: [text]}
          tally:
            kind: python
            function: digest_skills:tally
            input: {type: object, properties: {results: {type: array}}, required: [results]}
            output: {type: object, properties: {ok: {type: integer}, failed: {type: integer}}, required: [ok, failed]}
    """,
    "workflows.yaml": """
        workflows:
          digest:
            steps:
              - id: split
                skill: lines
                input: {text: $toolArgs.text}
              - id: each
                workflow: perLine
                forEach: $steps.split.output.items
                concurrency: 3
                onItemError: collect
                input: {text: $item.text, position: $index}
              - parallel:
                  - id: wrap
                    workflow: wrapUp
                    input: {results: $steps.each.output}
                  - id: stats
                    skill: tally
                    input: {results: $steps.each.output}
            output: {wrap: $steps.wrap.output, stats: $steps.stats.output}
          perLine:
            steps:
              - id: check
                skill: check
                input: {text: $toolArgs.text, position: $toolArgs.position}
              - id: say
                skill: say
                input: {text: $steps.check.output.text}
            output: {text: $steps.check.output.text, said: $steps.say.output}
          wrapUp:
            steps:
              - id: count
                skill: tally
                input: {results: $toolArgs.results}
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
    "digest_skills.py": '''
        def lines(input):
            return {"items": [{"text": line.strip()} for line in input["text"].splitlines() if line.strip()]}


        def check(input):
            if "FAIL" in input["text"]:
                raise ValueError("cannot check line " + str(input["position"]))
            return {"text": input["text"].upper()}


        def tally(input):
            ok = sum(1 for result in input["results"] if result["ok"])
            return {"ok": ok, "failed": len(input["results"]) - ok}
    ''',
}


def digest_text() -> str:
    """DIGEST_LINES lines; those at DIGEST_FAILING make their item's sub-workflow fail."""
    return "\n".join(f"FAIL line {i}" if i in DIGEST_FAILING else f"line {i}" for i in range(DIGEST_LINES))


def write_digest_project(root: Path) -> Path:
    for name, text in DIGEST_FILES.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root

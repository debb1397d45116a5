"""Two or more failing forEach items with `onItemError: fail` (issue 30 §5): the call fails
with the first item's error and every other task's exception is retrieved, so asyncio never
prints `Task exception was never retrieved` with a traceback."""

from __future__ import annotations

import gc
import logging
from pathlib import Path

from engine.cli.main import main

FILES = {
    "tools.yaml": """\
tools:
  many:
    description: Many
    workflow: many
    parameters:
      type: object
      properties: {items: {type: array, items: {type: string}}}
      required: [items]
""",
    "skills.yaml": """\
skills:
  fails:
    kind: python
    function: failing_items:fail
    input:
      type: object
      properties: {text: {type: string}}
      required: [text]
""",
    "workflows.yaml": """\
workflows:
  many:
    steps:
      - id: each
        skill: fails
        forEach: $toolArgs.items
        concurrency: 4
        onItemError: fail
        input: {text: $item}
""",
    "failing_items.py": """\
from engine import StepFailure


def fail(input):
    raise StepFailure("execution_error", f"item {input['text']} is bad")
""",
}


def test_every_failing_item_is_retrieved_and_no_traceback_is_printed(tmp_path: Path, capsys, caplog):
    (tmp_path / "config").mkdir()
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    caplog.set_level(logging.ERROR, logger="asyncio")
    code = main(["call", "many", "--dir", str(tmp_path), "--args-json", '{"items": ["a", "b", "c", "d"]}',
                 "--no-store", "--quiet"])
    gc.collect()  # a task whose exception nobody retrieved complains when it is collected
    err = capsys.readouterr().err
    assert code == 1
    assert "step 'each' item 0: item a is bad" in err
    assert "never retrieved" not in err + caplog.text and "Traceback" not in err + caplog.text

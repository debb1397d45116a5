"""when / forEach / parallel / sub-workflows on the Temporal backend: a real dev server, a real
PostgreSQL, a real `skillyard worker` and real `skillyard call` processes; the same output and
the same events as a local run, each event stored once."""

from __future__ import annotations

import pytest

from temporal_server import temporal_address  # noqa: F401 - the session's dev server (a fixture)
from test_temporal import Setup, comparable, events_of, setup, workflow_status  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow  # every test here starts a process or a server

TOOL = """
  branches:
    description: Every construct at once.
    parameters:
      type: object
      properties: {text: {type: string}, loud: {type: boolean, default: false}}
      required: [text]
    workflow: branches
"""
WORKFLOW = """
  branches:
    steps:
      - id: words
        skill: split
        input: {text: $toolArgs.text}
      - id: each
        skill: count
        forEach: $steps.words.output.words
        concurrency: 2
        input: {text: $item}
      - id: again
        workflow: loudly
        forEach: $steps.words.output.words
        onItemError: collect
        input: {text: $item}
      - parallel:
          - id: first
            skill: shout
            input:
              text: $steps.each.output[0].text
          - id: loud
            workflow: loudly
            when: $toolArgs.loud == true
            input: {text: $toolArgs.text}
    output:
      first: $steps.first.output
      loud: $steps.loud.output ?? "quiet"
      count: $steps.each.output
      again: $steps.again.output
  loudly:
    steps:
      - {id: shout, skill: shout, input: {text: $toolArgs.text}}
"""
SKILL = """
  split:
    kind: template
    template: '{"words": {{ text.split() | tojson }}}'
    input: {type: object, properties: {text: {type: string}}, required: [text]}
    output: {type: object, properties: {words: {type: array, items: {type: string}}}, required: [words]}
"""


def test_constructs_run_on_a_worker_as_they_run_locally(setup: Setup) -> None:  # noqa: F811
    for name, extra in (("tools.yaml", TOOL), ("workflows.yaml", WORKFLOW), ("skills.yaml", SKILL)):
        with open(setup.root / name, "a") as out:
            out.write(extra)
    setup.start_worker()
    args = ("--args-json", '{"text": "one two three", "loud": false}', "--output", "events", "--quiet")
    remote = setup.call("branches", *args)
    local = setup.call("branches", *args, backend="local")
    assert remote.returncode == 0 == local.returncode, remote.stderr + local.stderr
    remote_events, remote_result = events_of(remote.stdout)
    local_events, local_result = events_of(local.stdout)
    assert remote_result["data"] == local_result["data"]
    assert remote_result["data"]["loud"] == "quiet" and remote_result["data"]["first"] == "ONE!"
    assert [e["text"] for e in remote_result["data"]["count"]] == ["one", "two", "three"]
    stages = [e["data"].get("stage") for e in remote_events if e["type"] == "tool_progress_delta"]
    assert "step_skipped" in stages and stages.count("item_finished") == 6
    # a sub-workflow per item (forEach over `workflow:`), its events marked with the item
    assert [e["output"] for e in remote_result["data"]["again"]] == ["ONE!", "TWO!", "THREE!"]
    inner = [e for e in remote_events if (e.get("step_id") or "").startswith("again/")]
    assert inner and sorted({e["data"]["item_index"] for e in inner}) == [0, 1, 2]
    # items run two at a time: the order of their events may differ, what happened may not
    assert sorted(comparable(e)[1:] for e in remote_events) == sorted(comparable(e)[1:] for e in local_events)
    stored = setup.stored(remote_result["run_id"])
    assert [e["seq"] for e in stored] == list(range(1, len(remote_events) + 1))
    assert workflow_status(setup.address, remote_result["run_id"]) == "COMPLETED"

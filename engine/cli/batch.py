"""`skillyard batch TOOL --data FILE …` and `skillyard batch compare A B`.

Exit codes fit CI: 0 every case ran and every expectation held, 1 otherwise, 2 usage errors,
130 interrupted (the results file stays valid; `--resume FILE` runs the missing cases).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, UsageError
from ..logging import configure_logging
from .arguments import positive_int
from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    SETTINGS_STILL_APPLY,
    add_backend_argument,
    open_engine,
    report_config,
)

if TYPE_CHECKING:  # building the parser (`--help`) loads none of what a batch runs
    from ..batch.reuse import ReuseTally
    from ..batch.runner import BatchRun


def add_batch_parser(commands: Any) -> None:
    batch = commands.add_parser(
        "batch", help="run a tool over a dataset, check expectations, compare with a baseline",
        description="Run TOOL once per case of --data, check each case's expectations, write one JSON line per case. "
                    "`skillyard batch compare BEFORE AFTER` compares two results files.",
    )
    batch.add_argument("tool", help="the tool to run (or `compare`, followed by two results files)")
    batch.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    batch.add_argument("--data", metavar="FILE", help="the cases: .jsonl, .csv or .yaml")
    batch.add_argument("--concurrency", type=positive_int, default=4, metavar="N", help="cases at once (default 4)")
    batch.add_argument("--model", help="use this model for every prompt skill (and judge)")
    batch.add_argument("--limit", type=positive_int, metavar="N", help="run only the first N cases")
    batch.add_argument("--filter", nargs="+", metavar="ID", help="run only these case ids")
    batch.add_argument("--out", metavar="FILE", help="write one JSON line per case here")
    batch.add_argument("--resume", metavar="FILE", help="run only the cases missing from this results file, appending to it")
    batch.add_argument("--baseline", metavar="FILE", help="compare the results with this earlier results file")
    batch.add_argument("--replay-from", metavar="FILE",
                       help="reuse the recorded model answers of the runs in this results file for prompts that did not "
                            "change; only changed prompts call a model")
    batch.add_argument("--dir", default=".", help="project directory (default: current directory)")
    batch.add_argument("--no-store", action="store_true", help="do not record the cases' runs in the run store" + SETTINGS_STILL_APPLY)
    add_backend_argument(batch)
    batch.set_defaults(handler=cmd_batch)



def cmd_batch(ns: argparse.Namespace) -> int:
    if ns.tool == "compare":
        return cmd_compare(ns)
    if ns.files:
        raise UsageError(f"unexpected argument(s) {' '.join(ns.files)}; a batch takes one TOOL and --data FILE")
    if not ns.data:
        raise UsageError("--data FILE is required: the cases to run (.jsonl, .csv or .yaml)")
    if ns.resume and ns.out and ns.out != ns.resume:
        raise UsageError("--resume FILE appends to FILE; leave out --out (or give the same file)")
    try:
        engine = open_engine(ns)
    except ConfigError as exc:
        return report_config(exc)
    try:
        return _run(ns, engine)
    finally:
        engine.close()


def _run(ns: argparse.Namespace, engine: Any) -> int:
    import asyncio

    from ..batch.progress import Progress
    from ..batch.recording import BatchRecording
    from ..batch.report import summary_lines
    from ..batch.runner import ResultsFile, read_results, run_batch

    settings = engine.project.settings.logging
    configure_logging(settings.format, settings.level, engine.project.redactor)
    batch = _plan(ns, engine)
    tally = _reuse_answers(ns, engine) if ns.replay_from else None
    out = ns.resume or ns.out
    done = read_results(ns.resume) if ns.resume else []
    finished = {record["id"] for record in done}
    batch.cases = [item for item in batch.cases if item.case.id not in finished]
    total = len(batch.cases) + len(done)
    if ns.resume:
        print(f"resuming: {len(done)} of {total} cases already in {ns.resume}; running {len(batch.cases)}", file=sys.stderr)
    redactor = engine.project.redactor
    results = ResultsFile(out, lambda record: redactor.for_run()(record))  # also hides, in messages, values redacted in the data
    progress = Progress(sys.stderr, len(batch.cases), live=sys.stderr.isatty())
    earlier = next((r["batch_id"] for r in done if r.get("batch_id")), None)  # a resumed batch keeps its id
    recording = BatchRecording(engine.store, ns.tool, total, ns.data, earlier)
    batch.batch_id = recording.batch_id  # on each case's span

    def on_record(record: dict[str, Any]) -> None:
        recording.add(record)  # before the results line is written: the line names its batch
        progress(record)

    try:
        asyncio.run(run_batch(engine, batch, results, on_record))
    except KeyboardInterrupt:
        progress.close()
        recording.finish("interrupted")
        where = f"; `--resume {out}` runs the rest" if out else ""
        print(f"stopped: {len(batch.records)} of {len(batch.cases)} cases finished{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        results.close()
    recording.finish("done")
    progress.close()
    if engine.store is not None:
        print(f"batch {recording.batch_id}: `skillyard runs --batch {recording.batch_id}` lists its runs", file=sys.stderr)
    records = done + batch.records
    for line in summary_lines(records, total):
        print(line, file=sys.stderr)
    if tally is not None:
        print(f"model answers {tally.reused} reused from {ns.replay_from} · {tally.asked} asked", file=sys.stderr)
    if ns.baseline:
        _show_comparison(read_results(ns.baseline), records)
    everything_held = all(r["ok"] or _expected_failure(r) for r in records) and all(r.get("passed", True) for r in records)
    return EXIT_OK if everything_held and len(records) == total else EXIT_FAILED


def _reuse_answers(ns: argparse.Namespace, engine: Any) -> ReuseTally:
    """Point the engine's models at the answers recorded for the runs of --replay-from."""
    from ..batch.reuse import ReuseTally, recorded_answers, reusing_project
    from ..batch.runner import read_results

    if engine.store is None:
        raise UsageError("--replay-from reads the recorded model answers from the run store; run without --no-store")
    if engine.backend is not None:
        raise UsageError("--replay-from answers from this process; use --backend local")
    run_ids = [record["run_id"] for record in read_results(ns.replay_from) if record.get("run_id")]
    if not run_ids:
        raise UsageError(f"--replay-from {ns.replay_from}: no results with a run_id in it (a file `skillyard batch --out` wrote)")
    tally = ReuseTally()
    engine.use_project(reusing_project(engine.project, recorded_answers(engine.store, run_ids), tally))
    return tally


def _expected_failure(record: dict[str, Any]) -> bool:
    """A failed call that an `error` expectation asked for."""
    return any(v["check"] == "error" for v in record.get("expect") or ()) and record.get("passed", False)


def _plan(ns: argparse.Namespace, engine: Any) -> BatchRun:
    from ..batch.dataset import load_cases
    from ..batch.judge import check_judge
    from ..batch.runner import BatchCase, BatchRun
    from ..link.expect import compile_checks

    project = engine.project
    if ns.tool in project.broken:
        problems = "\n  ".join(str(issue) for issue in project.broken[ns.tool])
        raise UsageError(f"tool {ns.tool!r} cannot run until its configuration is fixed:\n  {problems}")
    if ns.tool not in project.tools:
        raise UsageError(f"unknown tool {ns.tool!r}; known: {', '.join(sorted(project.tools))}")
    if ns.model and ns.model not in project.models:
        raise UsageError(f"--model {ns.model}: unknown model; known: {', '.join(sorted(project.models))}")
    parameters = project.tools[ns.tool].parameters
    strings = frozenset(name for name, schema in (parameters.get("properties") or {}).items()
                        if isinstance(schema, dict) and schema.get("type") == "string")
    cases = load_cases(ns.data, strings)
    if ns.filter:
        unknown = sorted(set(ns.filter) - {case.id for case in cases})
        if unknown:
            raise UsageError(f"--filter: no case with id {', '.join(unknown)} in {ns.data}")
        cases = [case for case in cases if case.id in set(ns.filter)]
    if ns.limit:
        cases = cases[: ns.limit]
    skills = frozenset(project.skills)
    defaults = project.tools[ns.tool].batch_expect  # `batch: expect:` of the tool, for cases without their own
    planned = [BatchCase(case, compile_checks(case.expect, case.where, skills) if case.expect is not None else defaults)
               for case in cases]
    for judge in sorted({c.operand for item in planned for c in item.checks if c.operator == "judge"}):
        check_judge(engine, judge)
    return BatchRun(ns.tool, planned, ns.concurrency, ns.model)


def cmd_compare(ns: argparse.Namespace) -> int:
    from ..batch.runner import read_results

    if len(ns.files) != 2:
        raise UsageError("usage: skillyard batch compare BEFORE.jsonl AFTER.jsonl")
    comparison = _show_comparison(read_results(ns.files[0]), read_results(ns.files[1]))
    return EXIT_FAILED if comparison.regressions else EXIT_OK


def _show_comparison(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> Any:
    from ..batch.report import compare

    comparison = compare(before, after)
    for line in comparison.lines:
        print(line)
    print(comparison.totals())
    return comparison

"""`python -m bench [--quick] [--json FILE] [--strict] [--cases abcd] [--no-langgraph]`."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from . import TARGETS, lg
from .cases import FULL, QUICK, STEP_COUNTS, concurrent, load_link, per_call


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "-"


class Report:
    def __init__(self, judged: bool):
        self.judged = judged
        self.verdicts: list[tuple[str, float, str]] = []  # (target key, value, verdict)

    def verdict(self, key: str, value: float, extra: str = "") -> str:
        target = TARGETS[key]
        if not self.judged:
            verdict = "n/a (quick)"
        else:
            verdict = "PASS" if target.passes(value) else "MISS"
        self.verdicts.append((key, value, verdict))
        shown = f"{value:,.1f} {target.unit}" if target.unit != "×" else f"{value:,.1f}×"
        line = f"  → {target.label}: {shown}   target {target.describe()}   {verdict}"
        return line + (f"   {extra}" if extra else "")

    @property
    def missed(self) -> bool:
        return any(v == "MISS" for _, _, v in self.verdicts)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="skillyard performance benchmark")
    parser.add_argument("--quick", action="store_true", help="few iterations, small project (seconds); targets not judged")
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--cases", default="abcd", help="which cases to run, e.g. 'ad' (default: abcd; f: forEach)")
    parser.add_argument("--no-langgraph", action="store_true", help="skip LangGraph even when it is installed")
    args = parser.parse_args(argv)

    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # progress on stderr and results interleave sensibly
    budget = QUICK if args.quick else FULL
    report = Report(judged=not args.quick)
    lg_version = None if args.no_langgraph else lg.available()
    cases = set(args.cases.lower())
    out: dict[str, Any] = {"mode": "quick" if args.quick else "full"}
    started = time.perf_counter()

    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    print(f"skillyard benchmark — {'quick' if args.quick else 'full'} mode")
    print(
        f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {load[0]:.2f} at start"
    )
    print(
        f"skillyard {_version('skillyard')}, jsonschema-rs {_version('jsonschema-rs')}, jinja2 {_version('jinja2')}, "
        f"pydantic {_version('pydantic')}, langgraph {lg_version or 'not installed'}"
    )
    out["environment"] = {
        "python": platform.python_version(), "cpus": os.cpu_count(), "load_average": load[0],
        "jsonschema_rs": _version("jsonschema-rs"), "langgraph": lg_version,
    }

    with tempfile.TemporaryDirectory(prefix="skillyard-bench-") as tmp:
        work = Path(tmp)
        if cases & {"a", "d"}:
            _log("running (a) per-call time" + (" and (d) LangGraph" if lg_version and "d" in cases else ""))
            a = per_call(work, budget, with_langgraph=bool(lg_version) and "d" in cases, log=_log)
            out["a"] = a
            _print_a(a, report)
            if "d" in cases:
                _print_d(a, lg_version, report)
        if "b" in cases:
            _log("running (b) 1,000 concurrent calls")
            b = concurrent(work, budget, with_langgraph=bool(lg_version) and "d" in cases, log=_log)
            out["b"] = b
            _print_b(b, report)
        if "c" in cases:
            _log("running (c) load + link")
            c = load_link(work, budget, log=_log)
            out["c"] = c
            _print_c(c, report, budget.large_count)
        if "f" in cases:
            from . import foreach

            _log("running (f) forEach")
            out["f"] = foreach.run(work, quick=args.quick, log=_log)
            foreach.print_report(out["f"], report.verdict)

    elapsed = time.perf_counter() - started
    print()
    print("Summary")
    for key, value, verdict in report.verdicts:
        target = TARGETS[key]
        print(f"  {verdict:<11} {target.label:<40} {value:>10,.1f} {target.unit:<4} target {target.describe()}")
    end_load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    print(f"  benchmark took {elapsed:.1f} s; load average {load[0]:.2f} at start, {end_load:.2f} at end"
          f" ({os.cpu_count()} CPUs: above that, other processes compete and the figures inflate)")
    out["verdicts"] = [{"target": k, "value": v, "verdict": d} for k, v, d in report.verdicts]
    out["seconds"] = elapsed
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
    return 1 if args.strict and report.missed else 0


def _print_a(a: dict[str, Any], report: Report) -> None:
    v = a["variants"]
    print()
    print("(a) Per-call time: Engine.call_tool → router → n-step workflow of trivial python skills")
    print("    on_event listener attached; validated: tool arguments, each skill's input and output")
    print(f"    {'variant':<42}{'median µs':>11}{'p10 µs':>10}{'p90 µs':>10}{'CPU µs':>9}{'calls':>9}")
    for n in STEP_COUNTS:
        rows = [
            (f"engine.call_tool, {n} steps ({a['events_per_call'][n]} events)", v[f"engine.{n}"]),
            (f"direct: {n} functions called in a row", v[f"direct.{n}"]),
            ("direct + jsonschema-rs at every boundary", v[f"validated.{n}"]),
        ]
        for label, row in rows:
            print(f"    {label:<42}{row['median_us']:>11.2f}{row['p10_us']:>10.2f}{row['p90_us']:>10.2f}"
                  f"{row['cpu_us']:>9.2f}{row['calls']:>9,}")
    e, d, w = a["engine_us"], a["direct_us"], a["validated_us"]
    print("    per added step (µs, from the medians):")
    for key in a["engine_step_us"]:
        print(f"      {key:<8} engine {a['engine_step_us'][key]:7.2f}   direct {a['direct_step_us'][key]:6.2f}"
              f"   direct+validation {a['validated_step_us'][key]:6.2f}")
    c = a["engine_cpu_step_us"]
    print(f"    CPU time per call (thread CPU, mean; not inflated by other processes' turns): "
          f"{a['engine_cpu_us'][3]:.1f} µs at 3 steps, {c['3->10']:.1f} / {c['3->50']:.1f} µs per added step (3→10 / 3→50)")
    if not a["events_ok"]:
        print("    WARNING: the listener did not see every event it should have")
    print(report.verdict("a.call3", e[3], f"({e[3] / d[3]:,.0f}× direct, {e[3] / w[3]:,.1f}× direct+validation)"))
    print(report.verdict("a.step10", a["engine_step_us"]["3->10"]))
    print(report.verdict("a.step", a["engine_step_us"]["3->50"]))


def _print_d(a: dict[str, Any], lg_version: str | None, report: Report) -> None:
    print()
    if "langgraph" not in a:
        print("(d) LangGraph: not installed (pip install -e '.[bench]') — skipped")
        return
    g = a["langgraph"]
    print(f"(d) LangGraph {lg_version}: the same chains as a StateGraph (no schema validation, no listener)")
    print(f"    {'steps':<8}{'invoke µs':>11}{'ainvoke µs':>12}{'engine µs':>11}{'LangGraph ÷ engine':>20}")
    for n in STEP_COUNTS:
        print(f"    {n:<8}{g['invoke_us'][n]:>11.1f}{g['ainvoke_us'][n]:>12.1f}{a['engine_us'][n]:>11.1f}{g['ratio'][n]:>19.1f}×")
    print("    per added step (µs): " + ", ".join(
        f"{k}: LangGraph {g['step_us'][k]:.1f} vs engine {a['engine_step_us'][k]:.1f}" for k in g["step_us"]))
    if "langgraph_cpu" in a:
        print("    by CPU time per call: LangGraph ÷ engine = "
              + ", ".join(f"{a['langgraph_cpu']['ratio'][n]:.1f}× at {n}" for n in STEP_COUNTS))
    print(report.verdict("d.ratio", g["ratio"][3], "(against the faster of invoke/ainvoke)"))


def _print_b(b: dict[str, Any], report: Report) -> None:
    print()
    print("(b) 1,000 concurrent calls of the 3-step workflow, each skill `async def` awaiting 10 ms")
    print("    every variant in a fresh process; wall = asyncio.gather of 1,000 calls (median of rounds)")
    print(f"    {'variant':<30}{'wall ms':>9}{'first ms':>10}{'÷ ideal':>9}{'CPU ms':>8}{'RSS before':>12}{'peak RSS':>10}")
    labels = {"bare": "bare: functions awaited by hand", "engine": "engine.call_tool, events on", "langgraph": "LangGraph ainvoke"}
    for mode in ("bare", "engine", "langgraph"):
        if mode not in b:
            continue
        r = b[mode]
        print(f"    {labels[mode]:<30}{r['median_wall_ms']:>9.1f}{r['first_wall_ms']:>10.1f}{r['median_wall_ms'] / b['ideal_ms']:>8.2f}×"
              f"{r['median_cpu_ms']:>8.1f}{r['rss_before_mib']:>10.1f} M{r['peak_rss_mib']:>8.1f} M")
    e = b["engine"]
    bare = b["bare"]
    print(f"    engine CPU: {e['median_cpu_ms']:.0f} ms for 1,000 calls, {(e['median_cpu_ms'] - bare['median_cpu_ms']) / 1000 * 1000:.0f} µs"
          f" per call above bare asyncio (one event loop: the wall can never be shorter than this CPU time)")
    print(f"    engine: {e['events_per_call']:.0f} events per call; peak RSS grew {e['peak_rss_mib'] - e['peak_before_mib']:.1f} MiB"
          f" over the process after import + load ({e['rss_before_mib']:.1f} MiB)")
    print(report.verdict("b.wall", e["median_wall_ms"],
                         f"(ideal 30 ms; bare asyncio {bare['median_wall_ms']:.1f} ms; engine overhead "
                         f"{e['median_wall_ms'] - bare['median_wall_ms']:.1f} ms)"))
    extra = ""
    if "langgraph" in b:
        extra = f"(LangGraph {b['langgraph']['median_wall_ms']:.0f} ms, {b['langgraph']['peak_rss_mib']:.0f} MiB)"
    print(report.verdict("b.rss", e["peak_rss_mib"], extra))


def _print_c(c: dict[str, Any], report: Report, count: int) -> None:
    print()
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(c["skill_kinds"].items()))
    print(f"(c) Load + link: {count} tools, {count} skills ({kinds}), {count} workflows")
    print(f"    {c['files']} YAML files, {c['bytes'] / 1024:,.0f} KiB; loaded: {c['summary']}")
    warm = sorted(c["warm_ms"])
    print(f"    Engine.from_dir, first in a fresh process: {c['cold_ms']:,.0f} ms"
          f" (after `import engine`: {c['import_ms']:,.0f} ms); again in the same process: {', '.join(f'{w:,.0f}' for w in warm)} ms")
    print(f"    split, on a further load: YAML + pydantic (load_specs) {min(c['load_specs_ms']):,.0f} ms,"
          f" link + compile {min(c['link_ms']):,.0f} ms; peak RSS of that process {c['peak_rss_mib']:.0f} MiB")
    if count != 500:
        print(f"    (quick mode: {count} of each; the target is for 500)")
    print(report.verdict("c.load", c["cold_ms"]))


if __name__ == "__main__":
    sys.exit(main())

"""`python -m bench.startup BASELINE [--rounds 5] [--json FILE] [--strict]`: what starting skillyard costs,
side by side with another checkout of it (e.g. `git worktree add ../base 4170149`).

Each figure is a fresh process with one tree on PYTHONPATH: `import engine` and `from engine
import Engine` (the time inside the process, the modules loaded, the peak RSS), `run-workflow
textReport --no-store` on the tree's own example project and the two `--help`s (wall time of the
whole process and its peak RSS, from `wait4`). The two trees take turns within every round, so a busy machine slows both alike;
each figure is the best of the rounds. The ratios are this tree's ÷ the baseline's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
TEXT = "Startup costs matter when a workflow takes fourteen milliseconds. " * 8

IMPORT = (
    "import time; t = time.perf_counter(); {statement}; elapsed = time.perf_counter() - t\n"
    "import json, sys\n"
    "hwm = next((int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')), 0)\n"
    "print(json.dumps({'s': elapsed, 'modules': len(sys.modules), 'rss_kib': hwm}))\n"
)
ENTRY = "import sys; from engine.cli.main import {entry}; sys.exit({entry}())"


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    limit: float | None  # the ratio this tree must stay at or under; None: shown, not judged


FIGURES = (
    Figure("import_s", "import engine, time in the process", 0.6),
    Figure("import_modules", "import engine, modules loaded", None),
    Figure("import_rss", "import engine, peak RSS", None),
    Figure("engine_s", "from engine import Engine, time in the process", None),
    Figure("engine_modules", "from engine import Engine, modules loaded", None),
    Figure("call_s", "run-workflow textReport --no-store, wall", 0.7),
    Figure("call_rss", "run-workflow textReport --no-store, peak RSS", 0.8),
    Figure("rw_help_s", "run-workflow --help, wall", None),
    Figure("rw_help_rss", "run-workflow --help, peak RSS", None),
    Figure("help_s", "skillyard --help, wall", None),
    Figure("help_rss", "skillyard --help, peak RSS", None),
)


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLYARD_", "OTEL_"))}
    env["PYTHONPATH"] = str(tree)
    return env


def _process(tree: Path, args: list[str], cwd: Path) -> tuple[float, float, str]:
    """Run one process: (wall seconds, peak RSS in KiB, stdout). Its stderr is kept for a failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *args], cwd=cwd, env=_env(tree), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{tree}: {' '.join(args)} exited {proc.returncode}:\n{err.read().decode()[-2000:]}")
        return wall, float(usage.ru_maxrss), out.read().decode()


def _imported(tree: Path, cwd: Path, statement: str) -> dict[str, float]:
    """What `statement` costs in a fresh process: seconds, modules loaded, the process's peak RSS in KiB."""
    out = _process(tree, ["-c", IMPORT.replace("{statement}", statement)], cwd)[2]
    return json.loads(out.strip().splitlines()[-1])


def measure(tree: Path, cwd: Path) -> dict[str, float]:
    """One round of every figure for one tree."""
    imported = _imported(tree, cwd, "import engine")
    engine = _imported(tree, cwd, "from engine import Engine")
    call = ["-c", ENTRY.format(entry="run_workflow_main"), "textReport", "--no-store", "--dir", str(tree),
            "--arg", f"text={TEXT}"]
    call_s, call_rss, _ = _process(tree, call, cwd)
    rw_help_s, rw_help_rss, _ = _process(tree, ["-c", ENTRY.format(entry="run_workflow_main"), "--help"], cwd)
    help_s, help_rss, _ = _process(tree, ["-c", ENTRY.format(entry="main"), "--help"], cwd)
    return {
        "import_s": imported["s"], "import_modules": imported["modules"], "import_rss": imported["rss_kib"],
        "engine_s": engine["s"], "engine_modules": engine["modules"],
        "call_s": call_s, "call_rss": call_rss, "rw_help_s": rw_help_s, "rw_help_rss": rw_help_rss,
        "help_s": help_s, "help_rss": help_rss,
    }


def run(baseline: Path, rounds: int, log: Any) -> dict[str, Any]:
    sides = {"baseline": baseline.resolve(), "this": HERE}
    best: dict[str, dict[str, float]] = {side: {} for side in sides}
    with tempfile.TemporaryDirectory(prefix="skillyard-startup-") as work:
        for tree in sides.values():  # once unmeasured: each tree's bytecode caches written, the files in the page cache
            measure(tree, Path(work))
        for index in range(rounds):
            order = list(sides.items()) if index % 2 == 0 else list(reversed(sides.items()))
            for side, tree in order:
                for key, value in measure(tree, Path(work)).items():
                    best[side][key] = min(value, best[side].get(key, value))
            log(f"  round {index + 1}/{rounds} done")
    return {"baseline": str(sides["baseline"]), "this": str(HERE), "rounds": rounds, "load": os.getloadavg(), "best": best}


def _shown(key: str, value: float) -> str:
    if key.endswith("_s"):
        return f"{value * 1000:,.0f} ms"
    if key.endswith("_rss"):
        return f"{value / 1024:,.1f} MiB"
    return f"{value:,.0f}"


def report(result: dict[str, Any]) -> tuple[list[str], bool]:
    base, this = result["baseline"], result["this"]
    lines = [f"baseline {base}", f"this     {this}",
             f"best of {result['rounds']} interleaved rounds; load average at the end {result['load'][0]:.2f}", "",
             f"  {'':<48}{'baseline':>12}{'this':>12}{'ratio':>8}  target"]
    missed = False
    for figure in FIGURES:
        before, after = result["best"]["baseline"][figure.key], result["best"]["this"][figure.key]
        ratio = after / before if before else float("nan")
        verdict = ""
        if figure.limit is not None:
            passed = ratio <= figure.limit
            missed |= not passed
            verdict = f"≤ {figure.limit:g}×  {'PASS' if passed else 'MISS'}"
        lines.append(f"  {figure.label:<48}{_shown(figure.key, before):>12}{_shown(figure.key, after):>12}{ratio:>7.2f}×  {verdict}")
    return lines, missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", type=Path, help="a checkout of skillyard to compare with (its root directory)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; each figure is the best (default 5)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a ratio misses its target")
    ns = parser.parse_args(argv)
    if not (ns.baseline / "engine" / "__init__.py").is_file():
        parser.error(f"{ns.baseline}: not a skillyard checkout (no engine/__init__.py)")
    result = run(ns.baseline, ns.rounds, lambda message: print(message, file=sys.stderr, flush=True))
    lines, missed = report(result)
    print("\n".join(lines))
    if ns.json:
        ns.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 1 if missed and ns.strict else 0


if __name__ == "__main__":
    sys.exit(main())

"""Agent-loop overhead benchmark: one runner, a plugin per framework (plugins/<name>.py).

    python -m bench.agentloop bench [--rounds 3] [--runs 50] [--out agentloop.json]  # the whole thing
    python -m bench.agentloop report agentloop.json [other.json …]                    # tables (markdown)
    python -m bench.agentloop profile --framework skillyard --scenario k1             # where the CPU goes
    python -m bench.agentloop worker --framework NAME --base-url URL                  # one measured process
    python -m bench.agentloop import --framework NAME                                 # one import-time probe

The peers (OpenAI Agents SDK, LangGraph, Pydantic AI) come with `pip install -e '.[bench]'`; one
that is not installed is skipped, and the run says so.

`bench` starts the fake model (fake_openai.py under uvicorn) pinned to CPU 1, then, for each
round, each framework in a rotated order: import probes (fresh processes) and one worker
process pinned to CPU 0. A worker loads the plugin, builds its agent, warms up, then runs the
scenarios interleaved (wall + getrusage CPU per run), then batches of concurrent runs
(asyncio.gather), and prints one JSON line. Everything a plugin needs is `load()` (the
framework's imports, timed) and `make(base_url) -> async run(scenario) -> final text`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]  # the repository: children and the fake run from it, with it on their path
FRAMEWORKS = ["floor", "floor_stream", "skillyard", "skillyard_stream", "pydantic_ai", "openai_agents", "langgraph"]
# what each framework needs besides skillyard's own dependencies (the `bench` extra): missing → skipped
NEEDS = {"pydantic_ai": "pydantic_ai", "openai_agents": "agents", "langgraph": "langchain_openai"}
SCENARIOS = ["k1", "k4", "seq5"]
WORKER_CPU, SERVER_CPU = "0", "1"


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _plugin(name: str):
    return importlib.import_module(f"bench.agentloop.plugins.{name}")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def missing(name: str) -> str | None:
    """Why framework `name` cannot run here (its package is not installed), or None."""
    import importlib.util

    package = NEEDS.get(name)
    if package is not None and importlib.util.find_spec(package) is None:
        return f"{package} is not installed (pip install -e '.[bench]')"
    return None


# ---------------------------------------------------------------- import probe (fresh process)

def cmd_import(args) -> None:
    plugin = _plugin(args.framework)  # plugins import only the stdlib and plugins.common at module level
    w0, c0 = time.perf_counter(), _cpu()
    versions = plugin.load()
    print(json.dumps({"import_wall_ms": (time.perf_counter() - w0) * 1e3, "import_cpu_ms": (_cpu() - c0) * 1e3,
                      "modules": len(sys.modules), "versions": versions}))


# ---------------------------------------------------------------- worker (one measured process)

async def _measured(args, run, calls) -> dict:
    from bench.agentloop.plugins import common

    async def checked(scenario: str) -> None:
        text = await run(scenario)
        if text != common.FINAL[scenario]:
            raise AssertionError(f"{args.framework} {scenario}: answer {text!r}")

    for _ in range(args.warmup):  # connections, lazy imports, caches
        for s in SCENARIOS:
            await checked(s)
    out: dict = {"rss_after_warmup_mb": _rss_mb(), "seq": {s: {"wall_ms": [], "cpu_ms": []} for s in SCENARIOS},
                 "conc": {s: [] for s in args.conc_scenarios.split(",")}}
    for i in range(args.runs):
        order = SCENARIOS[i % 3:] + SCENARIOS[:i % 3]
        for s in order:
            n0 = calls[0]
            c0 = _cpu()
            w0 = time.perf_counter_ns()
            text = await run(s)
            w1 = time.perf_counter_ns()
            c1 = _cpu()
            if text != common.FINAL[s] or calls[0] - n0 != common.SCENARIOS[s]:
                raise AssertionError(f"{args.framework} {s}: answer {text!r}, {calls[0] - n0} tool calls")
            out["seq"][s]["wall_ms"].append((w1 - w0) / 1e6)
            out["seq"][s]["cpu_ms"].append((c1 - c0) * 1e3)
    await asyncio.gather(*(checked("k1") for _ in range(args.concurrency)))  # opens the pool to that width
    for s in args.conc_scenarios.split(","):
        for _ in range(args.batches):
            n0 = calls[0]
            c0, w0 = _cpu(), time.perf_counter()
            await asyncio.gather(*(checked(s) for _ in range(args.concurrency)))
            wall, cpu = time.perf_counter() - w0, _cpu() - c0
            assert calls[0] - n0 == common.SCENARIOS[s] * args.concurrency
            out["conc"][s].append({"wall_s": wall, "cpu_s": cpu, "runs_per_s": args.concurrency / wall,
                                   "cpu_ms_per_run": cpu * 1e3 / args.concurrency})
    return out


def cmd_worker(args) -> None:
    import gc

    plugin = _plugin(args.framework)
    from bench.agentloop.plugins import common

    w0, c0 = time.perf_counter(), _cpu()
    versions = plugin.load()
    imported = {"import_wall_ms": (time.perf_counter() - w0) * 1e3, "import_cpu_ms": (_cpu() - c0) * 1e3}
    w0, c0 = time.perf_counter(), _cpu()
    run = plugin.make(args.base_url)
    setup = {"setup_wall_ms": (time.perf_counter() - w0) * 1e3, "setup_cpu_ms": (_cpu() - c0) * 1e3}
    gc.collect()
    out = asyncio.run(_measured(args, run, common.CALLS))
    out.update(imported, **setup, framework=args.framework, versions=versions,
               peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(out))


# ---------------------------------------------------------------- orchestrator

def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _start_server() -> tuple[subprocess.Popen, str]:
    """uvicorn on a free port, pinned to SERVER_CPU. Not `--fd`: uvicorn takes an inherited socket
    for AF_UNIX and then leaves Nagle on, which stalls every response ~40 ms (delayed ACK)."""
    for _ in range(5):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        proc = subprocess.Popen(
            ["taskset", "-c", SERVER_CPU, sys.executable, "-m", "uvicorn", "bench.agentloop.fake_openai:app", "--host", "127.0.0.1",
             "--port", str(port), "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
             "--backlog", "2048", "--timeout-keep-alive", "60"], cwd=ROOT, env=_env())
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            if proc.poll() is not None:
                break  # the port was taken meanwhile: another one
            try:
                _get(base + "/stats")
                return proc, base
            except OSError:
                time.sleep(0.1)
        proc.kill()
        proc.wait()
    raise RuntimeError("the fake server did not start")


def _child(argv: list[str], timeout: float) -> dict:
    done = subprocess.run(["taskset", "-c", WORKER_CPU, sys.executable, "-m", "bench.agentloop", *argv],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=_env())
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def cmd_bench(args) -> None:
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the server (and the worker)
    frameworks = args.frameworks.split(",") if args.frameworks else FRAMEWORKS
    skipped = {name: why for name in frameworks if (why := missing(name)) is not None}
    for name, why in skipped.items():
        print(f"skipped {name}: {why}", file=sys.stderr)
    frameworks = [name for name in frameworks if name not in skipped]
    proc, base = _start_server()
    print(f"fake server pid {proc.pid} on {base} (CPU {SERVER_CPU}); workers on CPU {WORKER_CPU}", file=sys.stderr)
    result = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "python": platform.python_version(),
              "params": {k: v for k, v in vars(args).items() if k != "func"}, "rounds": [], "skipped": skipped,
              "load": os.getloadavg(), "cpus": os.cpu_count()}
    t_start = time.time()
    try:
        for r in range(args.rounds):
            order = frameworks[r % len(frameworks):] + frameworks[:r % len(frameworks)]
            this_round = {}
            for name in order:
                probes = [_child(["import", "--framework", name], 120) for _ in range(args.import_probes)]
                urllib.request.urlopen(urllib.request.Request(base + "/stats/reset", method="POST"), timeout=10).read()
                s0 = _get(base + "/stats")
                w = _child(["worker", "--framework", name, "--base-url", base + "/v1", "--runs", str(args.runs),
                            "--warmup", str(args.warmup), "--concurrency", str(args.concurrency),
                            "--batches", str(args.batches), "--conc-scenarios", args.conc_scenarios], 1800)
                s1 = _get(base + "/stats")
                w["import_probes"] = probes
                w["server"] = {"requests": s1["requests"], "stream": s1["stream"], "non_stream": s1["non_stream"],
                               "errors": s1["errors"], "by_ua": s1["by_ua"], "cpu_s": s1["cpu_s"] - s0["cpu_s"]}
                this_round[name] = w
                seq = {s: statistics.median(w["seq"][s]["cpu_ms"]) for s in SCENARIOS}
                print(f"[{time.time() - t_start:6.0f}s] round {r + 1}/{args.rounds} {name:14s} cpu/run ms "
                      + " ".join(f"{s}={v:.2f}" for s, v in seq.items())
                      + f"  server reqs={s1['requests']} stream={s1['stream']} errors={s1['errors']}", file=sys.stderr)
            result["rounds"].append(this_round)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(result))
    finally:
        proc.terminate()  # the server this run started, by its own handle
        proc.wait(10)
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    Path(args.out).write_text(json.dumps(result))
    print(report([args.out]))


# ---------------------------------------------------------------- report

def _q(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _pooled(rounds: list[dict], name: str, scenario: str, key: str) -> list[float]:
    return [v for rnd in rounds for v in rnd[name]["seq"][scenario][key]]


def report(paths: list[str]) -> str:
    lines: list[str] = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        rounds = data["rounds"]
        names = [n for n in FRAMEWORKS if n in rounds[0]]
        p = data["params"]
        for name, why in (data.get("skipped") or {}).items():
            lines.append(f"skipped {name}: {why}")
        if "floor" not in names:  # (a partial run, e.g. the smoke test's): the figures, no ratios
            lines += [f"{n} {s}: CPU ms/run median {statistics.median(_pooled(rounds, n, s, 'cpu_ms')):.2f}"
                      for n in names for s in SCENARIOS]
            continue
        lines += targets(rounds, names) + [""]
        lines += [f"### {Path(path).stem}: {len(rounds)} rounds × {p['runs']} runs per scenario, concurrency "
                  f"{p['concurrency']} × {p['batches']} batches ({data['started']} – {data.get('finished', '?')})", ""]

        def ratio(v: float, floor: float) -> str:
            return f"{v / floor:.2f}×" if floor else "–"

        def per_round_range(name: str, s: str, key: str, rounds: list = rounds) -> str:
            rs = [statistics.median(rnd[name]["seq"][s][key]) / statistics.median(rnd["floor"]["seq"][s][key])
                  for rnd in rounds]
            return f"{min(rs):.2f}–{max(rs):.2f}"

        modes = {}
        for n in names:
            srv = rounds[0][n]["server"]
            modes[n] = "stream" if srv["stream"] and not srv["non_stream"] else "non-stream" if srv["non_stream"] and not srv["stream"] else "mixed"
        for key, title in (("wall_ms", "Wall time per agent run, ms (median / p99), sequential"),
                           ("cpu_ms", "CPU time of the framework's process per agent run, ms (median / p99)")):
            lines += [f"**{title}**", "",
                      "| framework | mode | " + " | ".join(f"{s} median | {s} p99 | {s} ×floor (rounds)" for s in SCENARIOS) + " |",
                      "|---|---|" + "---:|---:|---:|" * len(SCENARIOS)]
            for n in names:
                cells = []
                for s in SCENARIOS:
                    vals, floor = _pooled(rounds, n, s, key), _pooled(rounds, "floor", s, key)
                    med = statistics.median(vals)
                    cells += [f"{med:.2f}", f"{_q(vals, 0.99):.2f}",
                              f"{ratio(med, statistics.median(floor))} ({per_round_range(n, s, key)})"]
                lines.append(f"| {n} | {modes[n]} | " + " | ".join(cells) + " |")
            lines.append("")
        # overhead above the floor of the same wire mode, CPU
        lines += ["**CPU per run above the floor of the same wire mode, ms (median − median)**", "",
                  "| framework | floor used | " + " | ".join(SCENARIOS) + " | per model call (seq5: 6 calls) |",
                  "|---|---|" + "---:|" * (len(SCENARIOS) + 1)]
        for n in names:
            if n.startswith("floor"):
                continue
            ref = "floor_stream" if modes[n] == "stream" else "floor"
            deltas = [statistics.median(_pooled(rounds, n, s, "cpu_ms")) - statistics.median(_pooled(rounds, ref, s, "cpu_ms"))
                      for s in SCENARIOS]
            lines.append(f"| {n} | {ref} | " + " | ".join(f"{d:+.2f}" for d in deltas) + f" | {deltas[2] / 6:+.2f} |")
        lines.append("")
        # concurrency
        cs = list(rounds[0]["floor"]["conc"])
        lines += [f"**{p['concurrency']} concurrent runs (asyncio.gather): throughput (runs/s, median batch), CPU ms per run, memory**", "",
                  "| framework | " + " | ".join(f"{s} runs/s | {s} ×floor | {s} CPU ms/run | {s} runs per CPU-s" for s in cs)
                  + " | CPU share of the batch | RSS after warm-up MB | peak RSS MB | ×floor | fake server CPU µs/request |",
                  "|---|" + "---:|---:|---:|---:|" * len(cs) + "---:|---:|---:|---:|---:|"]

        def conc(n: str, s: str, key: str, rounds: list = rounds) -> float:
            return statistics.median([b[key] for rnd in rounds for b in rnd[n]["conc"][s]])

        floor_peak = statistics.median([rnd["floor"]["peak_rss_mb"] for rnd in rounds])
        for n in names:
            cells = []
            for s in cs:
                v = conc(n, s, "runs_per_s")
                cpu = conc(n, s, "cpu_ms_per_run")
                cells += [f"{v:.1f}", ratio(v, conc("floor", s, "runs_per_s")), f"{cpu:.2f}", f"{1e3 / cpu:.0f}"]
            share = statistics.median([b["cpu_s"] / b["wall_s"] for rnd in rounds for s in cs for b in rnd[n]["conc"][s]])
            cells.append(f"{share:.0%}")
            rss = statistics.median([rnd[n]["rss_after_warmup_mb"] for rnd in rounds])
            peak = statistics.median([rnd[n]["peak_rss_mb"] for rnd in rounds])
            srv = statistics.median([rnd[n]["server"]["cpu_s"] / rnd[n]["server"]["requests"] * 1e6 for rnd in rounds])
            lines.append(f"| {n} | " + " | ".join(cells) + f" | {rss:.0f} | {peak:.0f} | {ratio(peak, floor_peak)} | {srv:.0f} |")
        lines.append("")
        # import + setup
        lines += ["**Import time (fresh process, `plugin.load()`), and building the agent**", "",
                  "| framework | import wall ms (median) | ×floor | import CPU ms | modules loaded | setup wall ms (agent built) |",
                  "|---|---:|---:|---:|---:|---:|"]
        floor_imp = statistics.median([pr["import_wall_ms"] for rnd in rounds for pr in rnd["floor"]["import_probes"]])
        for n in names:
            probes = [pr for rnd in rounds for pr in rnd[n]["import_probes"]]
            wall = statistics.median([pr["import_wall_ms"] for pr in probes])
            cpu = statistics.median([pr["import_cpu_ms"] for pr in probes])
            mods = statistics.median([pr["modules"] for pr in probes])
            setup = statistics.median([rnd[n]["setup_wall_ms"] for rnd in rounds])
            lines.append(f"| {n} | {wall:.0f} | {ratio(wall, floor_imp)} | {cpu:.0f} | {mods:.0f} | {setup:.1f} |")
        lines.append("")
    return "\n".join(lines)


def _cpu_per_run(rounds: list[dict], name: str) -> dict[str, float]:
    """Median CPU ms per conversation: each sequential scenario, and each batch of 100 at once."""
    out = {s: statistics.median(_pooled(rounds, name, s, "cpu_ms")) for s in SCENARIOS}
    for s in rounds[0][name]["conc"]:
        out[f"{s} at once"] = statistics.median(
            [b["cpu_ms_per_run"] for rnd in rounds for b in rnd[name]["conc"][s]])
    return out


def targets(rounds: list[dict], names: list[str]) -> list[str]:
    """The agent loop's targets (docs/performance.md): skillyard ≤ 1.15× the plain floor with no
    watcher, ≤ 1.25× with one (streaming), ahead of every peer everywhere, peak RSS ≤ 1.2× the floor's."""
    cpu = {n: _cpu_per_run(rounds, n) for n in names}
    cells = list(cpu["floor"])
    peers = [n for n in names if n in NEEDS]
    lines = ["**Targets: CPU per conversation, ratio to the floor (non-streaming `openai` loop)**", "",
             "| framework | " + " | ".join(cells) + " | peak RSS ×floor |", "|---|" + "---:|" * (len(cells) + 1)]
    peak = {n: statistics.median([rnd[n]["peak_rss_mb"] for rnd in rounds]) for n in names}
    for n in names:
        lines.append(f"| {n} | " + " | ".join(f"{cpu[n][c] / cpu['floor'][c]:.2f}×" for c in cells)
                     + f" | {peak[n] / peak['floor']:.2f}× |")
    checks = []
    if "skillyard" in cpu:
        worst = max(cpu["skillyard"][c] / cpu["floor"][c] for c in cells)
        checks.append(f"skillyard, no watcher: worst {worst:.2f}× the floor (target ≤ 1.15×)")
        checks.append(f"skillyard peak RSS {peak['skillyard'] / peak['floor']:.2f}× the floor's (target ≤ 1.2×)")
        behind = [f"{p} {c}" for p in peers for c in cells if cpu["skillyard"][c] >= cpu[p][c]]
        checks.append("skillyard ahead of every peer in every scenario" if peers and not behind
                      else f"skillyard behind: {', '.join(behind)}" if behind else "no peer measured")
    if "skillyard_stream" in cpu and "floor_stream" in cpu:
        worst = max(cpu["skillyard_stream"][c] / cpu["floor_stream"][c] for c in cells)
        plain = max(cpu["skillyard_stream"][c] / cpu["floor"][c] for c in cells)
        checks.append(f"skillyard watched (streaming): worst {worst:.2f}× the streaming floor, {plain:.2f}× the plain "
                      "one (target ≤ 1.25×)")
    return lines + [""] + [f"- {c}" for c in checks]


def cmd_report(args) -> None:
    print(report(args.paths))


# ---------------------------------------------------------------- profile

def cmd_profile(args) -> None:
    import cProfile

    plugin = _plugin(args.framework)
    plugin.load()
    proc, base = (None, args.base_url) if args.base_url else _start_server()
    base_v1 = base if base.endswith("/v1") else base + "/v1"
    try:
        run = plugin.make(base_v1)

        async def main() -> float:
            for _ in range(50):
                await run(args.scenario)
            profiler = cProfile.Profile() if args.tool == "cprofile" else None
            if args.tool == "pyinstrument":
                from pyinstrument import Profiler
                profiler = Profiler(interval=0.0001, async_mode="disabled")
            c0 = _cpu()
            profiler.enable() if args.tool == "cprofile" else profiler.start()
            for _ in range(args.runs):
                await run(args.scenario)
            profiler.disable() if args.tool == "cprofile" else profiler.stop()
            cpu = (_cpu() - c0) * 1e3 / args.runs
            if args.tool == "cprofile":
                profiler.dump_stats(args.out)
            else:
                Path(args.out).write_text(profiler.output_text(unicode=False, color=False, show_all=False))
            return cpu

        cpu = asyncio.run(main())
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    print(f"{args.framework} {args.scenario}: {args.runs} runs under {args.tool}, {cpu:.2f} ms CPU per run (profiled)")
    if args.tool == "cprofile":
        print(profile_summary(args.out, args.runs, args.top))


def _bucket(filename: str) -> str:
    f = filename.replace("\\", "/")
    mine = str(ROOT / "engine") + "/"
    if f.startswith(mine):
        return "skillyard engine/" + f[len(mine):].split("/")[0]
    if "site-packages/" in f:
        return f.split("site-packages/")[1].split("/")[0].removesuffix(".py")
    if f.startswith("~") or f.startswith("<"):
        return "builtins (C)"
    if "/lib/python3" in f:
        return "stdlib " + f.split("/lib/python3.11/")[-1].split("/")[0].removesuffix(".py")
    return f.split("/")[-1]


def _short(filename: str) -> str:
    for marker in ("/skillyard/", "site-packages/", "/lib/python3.11/", "/harness/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


IDLE = "idle: epoll wait (the fake's latency, other jobs)"


def _owner_buckets(stats) -> dict[str, float]:
    """Self time per owner: a builtin's or a stdlib helper's time (typing, inspect, json, …) goes
    to the nearest callers that are neither (split by the time each caller spent in it); the
    asyncio event loop keeps its own; the epoll wait is idle time, not work."""
    raw = stats.stats
    memo: dict = {}
    active: set = set()

    def transparent(key) -> bool:
        b = _bucket(key[0])
        return (b == "builtins (C)" or b.startswith("stdlib ")) and b not in ("stdlib asyncio", "stdlib selectors")

    def owners_of(key) -> dict[str, float]:  # owner -> fraction of this function's time
        if key in memo:
            return memo[key]
        if key[2].startswith("<method 'poll'") and "epoll" in key[2]:
            return {IDLE: 1.0}
        if not transparent(key):
            return {_bucket(key[0]): 1.0}
        active.add(key)
        weights = {c: v[3] for c, v in raw[key][4].items() if c in raw and c not in active}
        total = sum(weights.values())
        dist: dict[str, float] = {}
        if not total:
            dist = {_bucket(key[0]): 1.0}
        else:
            for caller, w in weights.items():
                for owner, f in owners_of(caller).items():
                    dist[owner] = dist.get(owner, 0.0) + f * w / total
        active.discard(key)
        memo[key] = dist
        return dist

    out: dict[str, float] = {}
    for key, (_cc, _nc, tt, _ct, _callers) in raw.items():
        for owner, f in owners_of(key).items():
            out[owner] = out.get(owner, 0.0) + tt * f
    return out


def profile_summary(path: str, runs: int, top: int) -> str:
    import pstats

    stats = pstats.Stats(path)
    total = stats.total_tt
    rows = []
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():
        label = f"{_short(filename)}:{line}({func})" if not filename.startswith("~") else func
        rows.append((tt, ct, nc, label))
    owners = _owner_buckets(stats)
    busy = total - owners.get(IDLE, 0.0)
    out = [f"profiled: {total * 1e3 / runs:.2f} ms per run under cProfile's wall-clock timer, {busy * 1e3 / runs:.2f} ms "
           "of it not waiting in epoll (cProfile inflates Python-heavy code; shares are what to read)", "",
           "self time by owner (builtins and stdlib helpers charged to the package that called them)", "",
           "| owner | ms/run | share of non-idle |", "|---|---:|---:|"]
    for name, tt in sorted(owners.items(), key=lambda kv: -kv[1])[:top]:
        share = "" if name == IDLE else f"{tt / busy:.1%}"
        out.append(f"| {name} | {tt * 1e3 / runs:.3f} | {share} |")
    out += ["", f"top {top} functions by self time", "", "| file:line(function) | calls/run | self ms/run | cum ms/run |", "|---|---:|---:|---:|"]
    for tt, ct, nc, label in sorted(rows, reverse=True)[:top]:
        out.append(f"| {label} | {nc / runs:.1f} | {tt * 1e3 / runs:.3f} | {ct * 1e3 / runs:.3f} |")
    out += ["", "(cProfile counts every resumption of a coroutine as a call, so async functions show more calls than runs)"]
    out += ["", f"top {top} skillyard functions by cumulative time", "", "| file:line(function) | calls/run | self ms/run | cum ms/run |", "|---|---:|---:|---:|"]
    mine = [r for r in rows if r[3].startswith("engine/")]
    for tt, ct, nc, label in sorted(mine, key=lambda r: -r[1])[:top]:
        out.append(f"| {label} | {nc / runs:.1f} | {tt * 1e3 / runs:.3f} | {ct * 1e3 / runs:.3f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(required=True)
    b = sub.add_parser("bench")
    b.add_argument("--rounds", type=int, default=3)
    b.add_argument("--runs", type=int, default=50, help="sequential runs per scenario per round")
    b.add_argument("--warmup", type=int, default=8)
    b.add_argument("--concurrency", type=int, default=100)
    b.add_argument("--batches", type=int, default=2)
    b.add_argument("--import-probes", type=int, default=1)
    b.add_argument("--conc-scenarios", default="k1,k4")
    b.add_argument("--frameworks", default="")
    b.add_argument("--out", default="results/run.json")
    b.set_defaults(func=cmd_bench)
    w = sub.add_parser("worker")
    w.add_argument("--framework", required=True)
    w.add_argument("--base-url", required=True)
    w.add_argument("--runs", type=int, default=150)
    w.add_argument("--warmup", type=int, default=20)
    w.add_argument("--concurrency", type=int, default=100)
    w.add_argument("--batches", type=int, default=3)
    w.add_argument("--conc-scenarios", default="k1,k4")
    w.set_defaults(func=cmd_worker)
    i = sub.add_parser("import")
    i.add_argument("--framework", required=True)
    i.set_defaults(func=cmd_import)
    r = sub.add_parser("report")
    r.add_argument("paths", nargs="+")
    r.set_defaults(func=cmd_report)
    pr = sub.add_parser("profile")
    pr.add_argument("--framework", default="skillyard")
    pr.add_argument("--scenario", default="k1")
    pr.add_argument("--runs", type=int, default=300)
    pr.add_argument("--tool", choices=["cprofile", "pyinstrument"], default="cprofile")
    pr.add_argument("--top", type=int, default=25)
    pr.add_argument("--base-url", default="")
    pr.add_argument("--out", default="results/profile.prof")
    pr.set_defaults(func=cmd_profile)
    ps = sub.add_parser("profile-summary")
    ps.add_argument("path")
    ps.add_argument("--runs", type=int, required=True)
    ps.add_argument("--top", type=int, default=25)
    ps.set_defaults(func=lambda a: print(profile_summary(a.path, a.runs, a.top)))
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()

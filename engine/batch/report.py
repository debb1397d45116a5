"""What a batch's results say: a summary of one file, and what changed between two."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..providers.pricing import format_usd, usage_cost

Record = dict[str, Any]
_MAX_DIFFS = 5  # output differences shown per case


def summary_lines(records: list[Record], total: int | None = None) -> list[str]:
    """The end-of-batch table: cases, ok, failures by code, expectations, durations, tokens."""
    ran = len(records)
    ok = sum(1 for r in records if r["ok"])
    failures = Counter((r.get("error") or {}).get("code", "error") for r in records if not r["ok"])
    verdicts = [v for r in records for v in r.get("expect") or ()]
    passed_cases = sum(1 for r in records if r.get("passed", True))
    lines = [f"cases        {ran}" + (f" of {total} (not run: {total - ran})" if total is not None and total != ran else "")]
    lines.append(f"ok           {ok}")
    lines.append(f"failed       {ran - ok}" + (f"  ({', '.join(f'{c} {n}' for c, n in failures.most_common())})" if failures else ""))
    if verdicts:
        held = sum(1 for v in verdicts if v["ok"])
        lines.append(f"expectations {held}/{len(verdicts)} held; {passed_cases}/{ran} cases met all of theirs")
    durations = sorted(r["duration_ms"] for r in records if isinstance(r.get("duration_ms"), (int, float)))
    if durations:
        lines.append(f"duration     p50 {_percentile(durations, 50):.1f} ms · p95 {_percentile(durations, 95):.1f} ms")
    tokens = _tokens(records)
    if any(tokens):
        cost = _cost(records)
        lines.append(f"tokens       {tokens[0]} in · {tokens[1]} out" + (f" · {format_usd(cost)}" if cost is not None else ""))
    return lines


def _percentile(ordered: list[float], p: int) -> float:
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return float(ordered[index])


def _tokens(records: list[Record]) -> tuple[int, int]:
    total_in = total_out = 0
    for record in records:
        for key in ("usage", "judge_usage"):
            usage = record.get(key) or {}
            total_in += int(usage.get("input_tokens") or 0)
            total_out += int(usage.get("output_tokens") or 0)
    return total_in, total_out


def _cost(records: list[Record]) -> float | None:
    """The cases' and judges' cost in USD; None when no model with prices answered."""
    costs = [c for r in records for key in ("usage", "judge_usage") if (c := usage_cost(r.get(key))) is not None]
    return sum(costs) if costs else None


@dataclass
class Comparison:
    lines: list[str] = field(default_factory=list)
    regressions: int = 0
    fixes: int = 0
    changed: int = 0
    unchanged: int = 0
    added: int = 0
    removed: int = 0

    def totals(self) -> str:
        return (f"{self.regressions} regression{'s' if self.regressions != 1 else ''}, {self.fixes} fix"
                f"{'es' if self.fixes != 1 else ''}, {self.changed} changed, {self.unchanged} unchanged"
                + (f", {self.added} new" if self.added else "") + (f", {self.removed} missing" if self.removed else ""))


def compare(before: list[Record], after: list[Record]) -> Comparison:
    """Per case that changed: status, expectations, output, duration and tokens; then totals."""
    old = {r["id"]: r for r in before}
    result = Comparison()
    for record in after:
        previous = old.pop(record["id"], None)
        if previous is None:
            result.added += 1
            result.lines.append(f"{record['id']}: new case ({'ok' if record['ok'] else 'failed'})")
            continue
        _compare_case(previous, record, result)
    for case_id in old:
        result.removed += 1
        result.lines.append(f"{case_id}: missing from the new results")
    return result


def _compare_case(before: Record, after: Record, result: Comparison) -> None:
    notes: list[str] = []
    regressed = fixed = False
    if before["ok"] != after["ok"]:
        code = (after.get("error") or {}).get("code", "error")
        notes.append("ok → failed (" + code + ")" if before["ok"] else "failed → ok")
        regressed, fixed = before["ok"], not before["ok"]
    for label, was, now in _verdict_pairs(before, after):
        if was != now:
            notes.append(f"expectation {label}: {'held → failed' if was else 'failed → held'}")
            regressed, fixed = regressed or was, fixed or not was
    if before["ok"] and after["ok"]:
        diffs = list(json_diff(before.get("data"), after.get("data")))
        notes.extend(f"output {line}" for line in diffs[:_MAX_DIFFS])
        if len(diffs) > _MAX_DIFFS:
            notes.append(f"output: {len(diffs) - _MAX_DIFFS} more differences")
    notes.extend(_cost_changes(before, after))
    if regressed:
        result.regressions += 1
    elif fixed:
        result.fixes += 1
    elif notes:
        result.changed += 1
    else:
        result.unchanged += 1
    if notes:
        mark = "REGRESSION " if regressed else ("fixed " if fixed else "")
        result.lines.append(f"{after['id']}: {mark}" + "; ".join(notes))


def _verdict_pairs(before: Record, after: Record) -> Iterator[tuple[str, bool, bool]]:
    old = {_label(v): v["ok"] for v in before.get("expect") or ()}
    for verdict in after.get("expect") or ():
        label = _label(verdict)
        if label in old:
            yield label, old[label], verdict["ok"]


def _label(verdict: dict[str, Any]) -> str:
    return verdict["check"] + (f" {verdict['path']}" if verdict.get("path") else "") + (
        f" ({verdict['judge']})" if verdict.get("judge") else "")


def _cost_changes(before: Record, after: Record) -> list[str]:
    notes = []
    was, now = before.get("duration_ms"), after.get("duration_ms")
    if isinstance(was, (int, float)) and isinstance(now, (int, float)) and abs(now - was) > max(50.0, 0.5 * was):
        notes.append(f"duration {was:.0f} → {now:.0f} ms")
    tokens_was, tokens_now = _tokens([before]), _tokens([after])
    if tokens_was != tokens_now:
        notes.append(f"tokens {sum(tokens_was)} → {sum(tokens_now)}")
    cost_was, cost_now = _cost([before]), _cost([after])
    if cost_was != cost_now and (cost_was is None or cost_now is None or abs(cost_now - cost_was) >= 1e-9):
        notes.append(f"cost {_usd(cost_was)} → {_usd(cost_now)}")
    return notes


def _usd(cost: float | None) -> str:
    return format_usd(cost) if cost is not None else "unpriced"


def json_diff(before: Any, after: Any, path: str = "") -> Iterator[str]:
    """Compact differences between two JSON values: `path: old → new`, `path: added …`, `path: removed`."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in [*before, *(k for k in after if k not in before)]:
            here = f"{path}/{key}"
            if key not in after:
                yield f"{here}: removed"
            elif key not in before:
                yield f"{here}: added {_short(after[key])}"
            else:
                yield from json_diff(before[key], after[key], here)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (a, b) in enumerate(zip(before, after, strict=True)):
            yield from json_diff(a, b, f"{path}/{index}")
    elif before != after or type(before) is not type(after):
        yield f"{path or '/'}: {_short(before)} → {_short(after)}"


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"

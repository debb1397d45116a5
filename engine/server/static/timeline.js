// The timeline of a run: tool call → workflow steps (skipped, parallel ∥, forEach items folded
// past the tenth, sub-workflows nested under the step or the item that runs them) → each
// skill's progress, prompts and answers as chat messages, outputs, token usage.
// Events are rendered generically from their documented fields (docs/events.md, docs/workflows.md),
// so a new stage shows as a progress line rather than being lost.
"use strict";

import { api } from "./api.js";
import { el, expandable, ms, pretty, usageCost, usageText } from "./dom.js";
import { elicitBox } from "./elicit.js";
import { markdownBox } from "./markdown.js";

export const VISIBLE_ITEMS = 10; // forEach items shown; the rest fold into "N more items"
const COUNTED = { ok: 1, error: 1, skipped: 1 }; // the statuses a fold counts; the rest are "not finished"

/** Puts `node` among `parent`'s children in order of their `key` (they mostly come in order: looks from the end). */
function insertInOrder(parent, node, key) {
  let after = null;
  for (let child = parent.lastElementChild; child && child[key] > node[key]; child = child.previousElementSibling) after = child;
  parent.insertBefore(node, after);
}

function itemIndexOf(ev) {
  const d = ev.data || {};
  const index = ev.item_index ?? d.item_index;
  return Number.isInteger(index) ? index : null;
}

/** One chat message of a prompt: its role, and its content as text (never as markup). */
function bubble(role, content, { answer = false, json = false } = {}) {
  const node = el("div", { class: "bubble", dataset: { role } }, el("div", { class: "role", text: answer ? `${role} (answer)` : role }));
  if (answer && json && typeof content === "string") {
    let parsed = content;
    try { parsed = JSON.parse(content); } catch { /* shown as it came */ }
    node.append(el("pre", { class: "code", text: pretty(parsed) }));
  } else if (answer && typeof content === "string") node.append(markdownBox(content, "md msg-body"));
  else if (typeof content === "string") node.append(el("div", { class: "msg-body plain", text: content }));
  else if (Array.isArray(content)) {
    for (const part of content) {
      node.append(part && part.type === "text" && typeof part.text === "string"
        ? el("div", { class: "msg-body plain", text: part.text })
        : el("pre", { class: "code", text: pretty(part) }));
    }
  } else node.append(el("pre", { class: "code", text: pretty(content) }));
  return node;
}

/** An error's details: the user's frames (`file:line in function` and the source line) as a traceback, the rest as JSON. */
function detailsView(details) {
  const frames = Array.isArray(details.frames) ? details.frames : null;
  if (!frames) return expandable("details", details);
  const rest = Object.fromEntries(Object.entries(details).filter(([key]) => key !== "frames" && key !== "exception"));
  const list = el("ol", { class: "frames" }, frames.map((f) => el("li", {},
    el("span", { class: "code", text: `${f.file}:${f.line} in ${f.function}` }),
    f.source ? el("pre", { class: "code", text: f.source }) : null)));
  return el("details", { class: "value frames-box", open: true }, el("summary", { text: `${details.exception || "error"} in your code (last call last)` }),
    list, Object.keys(rest).length ? expandable("more details", rest) : null);
}

function exchangeView(d) {
  const messages = el("div", { class: "exchange" });
  for (const message of d.messages || []) messages.append(bubble(message.role || "?", message.content));
  messages.append(bubble("assistant", d.response, { answer: true, json: !!d.output_schema }));
  const summary = [`prompt and answer · ${d.model} · attempt ${d.attempt}`, d.usage ? usageText(d.usage) : null].filter(Boolean).join(" · ");
  return el("details", { class: "value exchange-box" }, el("summary", { text: summary }), messages);
}

export class Timeline {
  constructor(root) {
    this.root = root;
    this.calls = new Map();
    this.models = new Map();
    this.t0 = null;
    this.totals = { input_tokens: 0, output_tokens: 0, cost_usd: null, answers: 0 };
    this.totalsNode = null;
    this.created = null; // the item box the last lookup created (an item first seen at its end was left out)
    root.replaceChildren();
    delete root.dataset.lastType;
    delete root.dataset.lastSeq;
  }

  stamp(ev) {
    if (this.t0 === null) this.t0 = ev.ts;
    return el("span", { class: "t", text: `+${ev.ts - this.t0} ms` });
  }

  row(ev, ...children) {
    const node = el("div", { class: "tl-row", dataset: { event: ev.type, seq: ev.seq } }, this.stamp(ev), ...children);
    this.root.append(node);
    return node;
  }

  /** A box with a head (stamp, label, what runs, status, duration, tokens) and a log below. */
  unit(ev, kind, label, dataset) {
    const node = el("div", { class: kind, dataset: { ...dataset, status: "running" } });
    node.label = el("strong", { text: label });
    node.skill = el("span", { class: "muted" });
    node.status = el("span", { class: "status", text: "running" });
    node.dur = el("span", { class: "dur" });
    node.usage = el("span", { class: "usage" });
    node.head = el("div", { class: "head" }, this.stamp(ev), node.label, node.skill, node.status, node.dur, node.usage);
    node.log = el("div", { class: "log" });
    node.append(node.head, node.log);
    return node;
  }

  call(ev) {
    let node = this.calls.get(ev.tool_call_id);
    if (!node) {
      node = this.unit(ev, "call", (ev.data && ev.data.tool) || "tool", { toolCallId: ev.tool_call_id || "", event: ev.type });
      node.isCall = true;
      node.call = node;
      node.units = [];
      node.subSteps = new Map(); // top-level step name → its box
      node.forEachSteps = new Map(); // step id of a forEach step → its box (the latest, for one nested in items)
      node.stepBox = el("div", { class: "steps" });
      node.append(node.stepBox);
      this.calls.set(ev.tool_call_id, node);
      this.root.append(node);
    }
    return node;
  }

  /** The step `name` inside `parent` (the call, a step running a sub-workflow, or a forEach item running one). */
  child(parent, name, path, ev) {
    let node = parent.subSteps.get(name);
    if (node) return node;
    node = this.unit(ev, "step", name || "step", { stepId: path });
    Object.assign(node, { call: parent.call, parentUnit: parent, subSteps: new Map(), items: new Map() });
    parent.call.units.push(node);
    if (parent.isCall) parent.stepBox.append(node);
    else {
      if (!parent.subBox) { parent.subBox = el("div", { class: "steps sub-steps" }); parent.append(parent.subBox); }
      parent.subBox.append(node);
    }
    parent.subSteps.set(name, node);
    return node;
  }

  /** `a/b/c` below `parent`, whose own path is `base`: each `/` is one sub-workflow level. */
  nested(parent, base, rest, ev) {
    let node = parent;
    let path = base;
    for (const name of rest.split("/")) {
      path = path ? `${path}/${name}` : name;
      node = this.child(node, name, path, ev);
    }
    return node;
  }

  /**
   * The box an event of step `path` goes to. Without an item_index: the step (nested under the
   * steps whose sub-workflows run it). With one: an item of the nearest forEach step at or above
   * `path` (from its parent when `own` is false: a step's own start and end happen outside its
   * items), and below that item the sub-workflow steps the path names.
   */
  locate(ev, path, index, own = true) {
    const call = this.call(ev);
    path = path || "";
    if (index === null) return this.nested(call, "", path, ev);
    const up = (id) => id.slice(0, Math.max(0, id.lastIndexOf("/")));
    for (let owner = own ? path : up(path); owner; owner = up(owner)) {
      const step = call.forEachSteps.get(owner);
      if (step) {
        const item = this.item(step, index, ev);
        return owner === path ? item : this.nested(item, owner, path.slice(owner.length + 1), ev);
      }
    }
    const step = this.nested(call, "", path, ev);
    return own ? this.item(step, index, ev) : step; // items of a step not announced as a forEach
  }

  /** The box of one forEach item; items past the first ten fold into a collapsed group. */
  item(step, index, ev) {
    let node = step.items.get(index);
    if (node) return node;
    node = this.unit(ev, "item", `item ${index}`, { itemIndex: String(index) }); // as $index and the engine's messages count
    Object.assign(node, { index, step, call: step.call, parentUnit: step, subSteps: new Map() });
    step.items.set(index, node);
    step.call.units.push(node);
    this.created = node;
    const parent = index >= VISIBLE_ITEMS ? this.fold(step).more : this.itemBox(step);
    insertInOrder(parent, node, "index");
    if (index >= VISIBLE_ITEMS) {
      step.fold.shown += 1;
      this.foldLabel(step);
    }
    return node;
  }

  itemBox(step) {
    if (!step.itemBox) {
      step.itemBox = el("div", { class: "items" });
      step.append(step.itemBox);
    }
    return step.itemBox;
  }

  /** The collapsed group of a forEach step's items past the tenth, and the list of its failed ones. */
  fold(step) {
    if (!step.fold) {
      this.itemBox(step);
      const label = el("summary", {});
      const more = el("details", { class: "more-items" }, label);
      const failed = el("div", { class: "failed-items", hidden: true }, el("span", { text: "failed:" }));
      step.append(more, failed);
      step.fold = { label, more, failed, shown: 0, ok: 0, error: 0, skipped: 0 };
    }
    return step.fold;
  }

  /** "… N more items: x ok, y failed": counted as items come and end, never by walking them (a forEach may have thousands). */
  foldLabel(step) {
    const f = step.fold;
    const n = Math.max(f.shown, Number(step.dataset.itemsTotal || 0) - VISIBLE_ITEMS);
    const rest = n - f.ok - f.error - f.skipped;
    f.label.textContent = `… ${n} more item${n === 1 ? "" : "s"}: ${f.ok} ok, ${f.error} failed`
      + `${f.skipped ? `, ${f.skipped} skipped` : ""}${rest > 0 ? `, ${rest} not finished` : ""}`;
  }

  /** A folded item changed status: its counts, and its link in the list of failed items. */
  refold(item, before, status) {
    const f = item.step.fold;
    if (before in COUNTED) f[before] -= 1;
    if (status in COUNTED) f[status] += 1;
    if (status === "error" && !item.failLink) {
      item.failLink = el("button", { type: "button", class: "link", text: `#${item.index}`, title: `open item ${item.index}`,
        onclick: () => { f.more.open = true; item.scrollIntoView({ block: "nearest" }); } });
      item.failLink.index = item.index;
      insertInOrder(f.failed, item.failLink, "index");
    } else if (before === "error" && item.failLink) {
      item.failLink.remove();
      item.failLink = null;
    }
    f.failed.hidden = f.error === 0;
    this.foldLabel(item.step);
  }

  /** Where a skill event goes: its step, the step's item, or a step of an item's sub-workflow. */
  target(ev) {
    return this.locate(ev, ev.step_id, itemIndexOf(ev));
  }

  setStatus(node, status) {
    const before = node.dataset.status;
    node.dataset.status = status;
    if (node.status) node.status.textContent = status;
    if (node.step && before !== status && (status === "error" || before === "error")) { // a failed item fails its step if the call ends with it
      node.step.failedItems = (node.step.failedItems || 0) + (status === "error" ? 1 : -1);
    }
    if (node.index >= VISIBLE_ITEMS && before !== status) this.refold(node, before, status);
  }

  /** A final error in a sub-workflow's step fails the steps that ran it, up to its forEach item. */
  failUp(unit) {
    if (unit.step) return; // an item: its step decides (onItemError)
    for (let up = unit.parentUnit; up && !up.isCall; up = up.parentUnit) {
      if (up.step) { this.setStatus(up, "error"); return; }
      if (up.dataset.status === "running") this.setStatus(up, "error");
    }
  }

  addUsage(node, usage) {
    for (let unit = node; unit; unit = unit.parentUnit) { // tokens count for the steps and items above, and the call
      const sum = unit.usageSum || { input_tokens: 0, output_tokens: 0 };
      sum.input_tokens += Number(usage.input_tokens || 0);
      sum.output_tokens += Number(usage.output_tokens || 0);
      const cost = usageCost(usage);
      if (cost !== null) sum.cost_usd = (sum.cost_usd || 0) + cost;
      unit.usageSum = sum;
      unit.usage.textContent = usageText(sum);
    }
    this.addTotal(usage);
  }

  addTotal(usage) {
    const t = this.totals;
    t.input_tokens += Number(usage.input_tokens || 0);
    t.output_tokens += Number(usage.output_tokens || 0);
    const cost = usageCost(usage);
    if (cost !== null) t.cost_usd = (t.cost_usd || 0) + cost;
    t.answers += 1;
    if (!this.totalsNode) {
      this.totalsNode = el("div", { class: "usage-total" });
      this.root.prepend(this.totalsNode);
    }
    this.totalsNode.textContent = `Model usage: ${usageText(t)} (${t.answers} model answer${t.answers === 1 ? "" : "s"})`;
    Object.assign(this.totalsNode.dataset, { inputTokens: t.input_tokens, outputTokens: t.output_tokens });
  }

  /** The workflow's own progress: steps started, finished, skipped; forEach items; sub-workflows; anything else as a line. */
  progress(ev, d) {
    if (!d.step_id) {
      this.call(ev).log.append(this.line(ev, d));
      return;
    }
    const index = itemIndexOf(ev);
    if (d.stage === "item_finished") return this.itemFinished(ev, d, index);
    if (d.stage === "prepared" || d.stage === "done") return this.subWorkflow(this.locate(ev, d.step_id, index), ev, d);
    const step = this.locate(ev, d.step_id, index, false);
    if (d.stage === "step_started") this.stepStarted(step, d);
    else if (d.stage === "step_finished") {
      step.dur.textContent = ms(d.duration_ms);
      if (step.dataset.status === "running") this.setStatus(step, d.status || "ok");
    } else if (d.stage === "step_cancelled") {
      if (step.dataset.status === "running") this.setStatus(step, "cancelled");
    } else if (d.stage === "step_skipped") {
      this.parallelMark(step, d);
      this.setStatus(step, "skipped");
      const condition = d.condition ?? d.when;
      step.log.append(el("div", { class: "condition" }, "skipped: ",
        condition !== undefined ? el("code", { text: `when ${typeof condition === "string" ? condition : pretty(condition)}` }) : null,
        condition !== undefined ? " did not hold" : (d.message || "its condition did not hold")));
    } else step.log.append(this.line(ev, d)); // a stage this page does not know yet: a line in its step
    if (d.items_total !== undefined || d.items_done !== undefined) this.itemCount(step, d);
  }

  line(ev, d) {
    return el("div", { class: "progress", dataset: { event: ev.type, stage: d.stage || "" } }, this.stamp(ev), d.message || d.stage || "");
  }

  stepStarted(step, d) {
    const name = d.step_id.slice(d.step_id.lastIndexOf("/") + 1);
    step.label.textContent = d.step !== undefined && d.of !== undefined ? `${d.step}/${d.of} ${name}` : name;
    if (d.workflow) step.skill.textContent = `workflow ${d.workflow}`;
    if (d.items_total !== undefined) step.call.forEachSteps.set(d.step_id, step); // its items' events find it by its id
    this.parallelMark(step, d);
    this.setStatus(step, "running");
  }

  /** A member of a parallel group: marked ∥, the others named in its title. */
  parallelMark(step, d) {
    if (!Array.isArray(d.parallel) || step.dataset.parallel) return;
    step.dataset.parallel = "true";
    const last = (id) => String(id).slice(String(id).lastIndexOf("/") + 1); // members inside a sub-workflow come as `parent/id`
    const others = d.parallel.map(last).filter((id) => id !== last(step.dataset.stepId));
    step.head.insertBefore(el("span", { class: "parallel-mark", text: "∥", title: `runs at the same time as ${others.join(", ")}` }), step.label);
  }

  /** A sub-workflow run by a step, or by one forEach item: its start and end say how the item went. */
  subWorkflow(unit, ev, d) {
    if (d.workflow && !unit.skill.textContent) unit.skill.textContent = `workflow ${d.workflow}`;
    if (!unit.step) return; // a plain `workflow:` step: its step_finished says it
    if (d.stage === "prepared") {
      unit.startedAt = ev.ts; // the item's duration: from its sub-workflow's start to the item's end
      this.setStatus(unit, "running");
    } else if (unit.dataset.status === "running") this.setStatus(unit, "ok");
  }

  /** An item is done: one that never started was left out by its `when`; one still running failed without a result. */
  itemFinished(ev, d, index) {
    this.created = null;
    const item = this.locate(ev, d.step_id, index);
    if (item.step) {
      if (this.created === item) this.setStatus(item, "skipped");
      else if (item.dataset.status === "running" || item.dataset.status === "retrying") this.setStatus(item, "error");
      if (item.startedAt !== undefined && typeof ev.ts === "number") item.dur.textContent = ms(ev.ts - item.startedAt);
    }
    this.itemCount(item.step || item, d);
  }

  itemCount(step, d) {
    if (!step.count) {
      step.bar = el("progress", { "aria-label": `${step.dataset.stepId} items done` });
      step.count = el("span", { class: "items-count" });
      step.head.append(step.count, step.bar);
    }
    const total = d.items_total ?? Number(step.dataset.itemsTotal || 0);
    const done = d.items_done ?? Number(step.dataset.itemsDone || 0);
    Object.assign(step.dataset, { itemsDone: done, itemsTotal: total });
    const failed = d.items_failed ? ` · ${d.items_failed} failed` : "";
    step.count.textContent = `${done} / ${total} item${total === 1 ? "" : "s"}${failed}`;
    step.bar.max = Math.max(1, total);
    step.bar.value = done;
    if (total > VISIBLE_ITEMS && (!step.fold || step.fold.total !== total)) { // known ahead: the fold counts the items not yet come
      this.fold(step).total = total;
      this.foldLabel(step);
    }
  }

  add(ev) {
    const d = ev.data || {};
    switch (ev.type) {
      case "agent_start":
        this.row(ev, el("strong", { text: "agent" }), ` on ${d.model} · tools: ${(d.tools || []).join(", ") || "none"}`);
        break;
      case "model_call_start": {
        const text = el("div", { class: "progress" });
        const node = this.row(ev, el("strong", { text: `model call ${d.step}` }), ` · ${d.model} · ${d.messages} message(s)`, text);
        node.text = text;
        this.models.set(d.step, node);
        break;
      }
      case "model_text_delta": {
        const node = this.models.get(d.step);
        if (node) node.text.textContent += d.text || "";
        break;
      }
      case "tool_call_start":
        this.call(ev).log.append(expandable("arguments", d.arguments));
        break;
      case "tool_progress_delta":
        this.progress(ev, d);
        break;
      case "skill_start": {
        const unit = this.target(ev);
        unit.skill.textContent = `${ev.skill}${d.kind ? ` (${d.kind})` : ""}${d.attempt > 1 ? ` · attempt ${d.attempt}` : ""}`;
        this.setStatus(unit, "running");
        unit.log.append(expandable("input", d.input));
        break;
      }
      case "skill_progress_delta":
        this.target(ev).log.append(el("div", { class: "progress", dataset: { event: ev.type } }, this.stamp(ev), d.message || d.stage || ""));
        break;
      case "model_exchange": {
        const unit = this.target(ev);
        unit.log.append(exchangeView(d));
        if (d.usage) this.addUsage(unit, d.usage);
        break;
      }
      case "skill_result": {
        const unit = this.target(ev);
        this.setStatus(unit, "ok");
        if (d.duration_ms !== undefined) unit.dur.textContent = ms(d.duration_ms);
        unit.log.append(expandable("output", d.output));
        break;
      }
      case "skill_error": {
        const unit = this.target(ev);
        this.setStatus(unit, d.will_retry ? "retrying" : "error");
        if (!d.will_retry) this.failUp(unit);
        unit.log.append(el("div", { class: "err-text", text: `${d.code || "error"}: ${d.message || ""}` }));
        if (d.details && Object.keys(d.details).length) unit.log.append(detailsView(d.details));
        break;
      }
      case "confirmation_required": {
        const call = this.call(ev);
        this.setStatus(call, "waiting");
        call.approval = this.approvalBox(ev, d);
        call.log.append(call.approval);
        break;
      }
      case "input_required": { // an MCP server asks for values (elicit.js)
        const call = this.call(ev);
        this.setStatus(call, "waiting");
        call.approval = elicitBox(ev, d);
        call.log.append(call.approval);
        break;
      }
      case "tool_call_result":
      case "tool_call_error":
        this.endCall(ev, d);
        break;
      case "final_answer_delta":
        this.row(ev, el("strong", { text: "answer" }), el("div", { class: "final" }, markdownBox(d.text || "", "md assistant-text")));
        break;
      case "agent_error":
        this.row(ev, el("span", { class: "err-text", text: `agent error: ${d.message}` }));
        break;
      case "agent_done":
        this.row(ev, el("strong", { text: "done" }), ` · ${d.stop_reason} · ${d.steps} step(s) · ${ms(d.duration_ms)}`,
          d.usage ? el("span", { class: "usage", text: ` · agent model: ${usageText(d.usage)}` }) : null);
        if (d.usage) this.addTotal(d.usage);
        break;
      default:
        this.row(ev, el("strong", { text: ev.type }), expandable("data", d));
    }
    this.root.dataset.lastType = ev.type;
    this.root.dataset.lastSeq = ev.seq;
  }

  endCall(ev, d) {
    const call = this.call(ev);
    const ok = ev.type === "tool_call_result";
    const error = d.error || {};
    this.setStatus(call, ok ? "ok" : (error.code === "cancelled" ? "cancelled" : "error"));
    call.dataset.event = ev.type;
    if (call.approval) call.approval.remove();
    call.dur.textContent = ms((d.metadata || {}).duration_ms);
    if (!ok) this.stopUnits(call);
    if (ok) call.log.append(expandable("output", d.data));
    else {
      call.log.append(el("div", { class: "err-text", text: `${error.code}: ${error.message}` }));
      if (error.details && Object.keys(error.details).length) call.log.append(detailsView(error.details));
    }
  }

  /** The call failed: a step still open with a failed item failed (onItemError: fail), with the steps above it;
   * steps and items still running were stopped with the call. */
  stopUnits(call) {
    const open = (unit) => unit.dataset.status === "running" || unit.dataset.status === "retrying";
    for (const unit of [...call.units].reverse()) { // inner units first: their failure reaches the items and steps above
      if (unit.failedItems > 0 && open(unit)) {
        this.setStatus(unit, "error");
        this.failUp(unit);
      }
    }
    for (const unit of call.units) if (open(unit)) this.setStatus(unit, "cancelled");
  }

  approvalBox(ev, d) {
    const runId = ev.run_id;
    const callId = ev.tool_call_id;
    const box = el("div", { class: "approval", dataset: { toolCallId: callId } }, `${d.tool} asks for approval.`);
    const answer = async (approve) => {
      for (const b of box.querySelectorAll("button")) b.disabled = true;
      try {
        await api("POST", `/v1/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(callId)}`, { approve });
        box.replaceChildren(approve ? "Approved." : "Denied.");
      } catch (error) {
        box.append(el("span", { class: "err-text", text: error.message }));
      }
    };
    box.append(el("button", { type: "button", class: "primary approve", text: "Approve", onclick: () => answer(true) }),
               el("button", { type: "button", class: "deny", text: "Deny", onclick: () => answer(false) }));
    return box;
  }
}

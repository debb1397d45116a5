// The timeline of a run: tool call → workflow steps (skipped, parallel, forEach items) →
// each skill's progress, prompts and answers as chat messages, outputs, token usage.
// Events are rendered generically from their documented fields (docs/events.md), so a new
// stage shows as a progress line rather than being lost.
"use strict";

import { api } from "./api.js";
import { el, expandable, ms, pretty, usageCost, usageText } from "./dom.js";
import { markdownBox } from "./markdown.js";

export const VISIBLE_ITEMS = 10; // forEach items shown; the rest fold into "N more items"
const STEP_STAGES = new Set(["step_started", "step_finished", "step_skipped", "step_cancelled"]);

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
    this.steps = new Map();
    this.models = new Map();
    this.t0 = null;
    this.totals = { input_tokens: 0, output_tokens: 0, cost_usd: null, answers: 0 };
    this.totalsNode = null;
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
      node.units = [];
      node.stepBox = el("div", { class: "steps" });
      node.append(node.stepBox);
      this.calls.set(ev.tool_call_id, node);
      this.root.append(node);
    }
    return node;
  }

  step(ev, stepId) {
    const key = `${ev.tool_call_id}\u0000${stepId}`;
    let node = this.steps.get(key);
    if (!node) {
      const call = this.call(ev);
      const cut = (stepId || "").lastIndexOf("/"); // `parent/id`: a step of the sub-workflow run by step `parent`
      node = this.unit(ev, "step", cut > 0 ? stepId.slice(cut + 1) : stepId || "step", { stepId: stepId || "" });
      node.call = call;
      node.items = new Map();
      call.units.push(node);
      if (cut > 0) {
        const parent = this.step(ev, stepId.slice(0, cut));
        if (!parent.subBox) { parent.subBox = el("div", { class: "steps sub-steps" }); parent.append(parent.subBox); }
        parent.subBox.append(node);
      } else call.stepBox.append(node);
      this.steps.set(key, node);
    }
    return node;
  }

  /** The box of one forEach item; items past the first ten fold into a collapsed group. */
  item(step, index, ev) {
    let node = step.items.get(index);
    if (node) return node;
    node = this.unit(ev, "item", `item ${index}`, { itemIndex: String(index) }); // as $index and the engine's messages count
    node.index = index;
    node.step = step;
    node.call = step.call;
    step.items.set(index, node);
    step.call.units.push(node);
    if (!step.itemBox) {
      step.itemBox = el("div", { class: "items" });
      step.append(step.itemBox);
    }
    let parent = step.itemBox;
    if (index >= VISIBLE_ITEMS) {
      if (!step.more) {
        step.moreLabel = el("summary", {});
        step.more = el("details", { class: "more-items" }, step.moreLabel);
        step.append(step.more);
      }
      parent = step.more;
    }
    let after = null; // items mostly arrive in order: look for the place from the end
    for (let child = parent.lastElementChild; child && child.index > index; child = child.previousElementSibling) after = child;
    parent.insertBefore(node, after);
    if (index >= VISIBLE_ITEMS) {
      step.folded = (step.folded || 0) + 1;
      this.foldLabel(step);
    }
    return node;
  }

  /** "N more items (k failed)": counted as items come and fail, never by walking them (a forEach may have thousands). */
  foldLabel(step) {
    const n = step.folded;
    const failed = step.foldedFailed || 0;
    step.moreLabel.textContent = `${n} more item${n === 1 ? "" : "s"}${failed ? ` (${failed} failed)` : ""}`;
  }

  /** Where a skill event goes: its step, or the step's item when the event has an item_index. */
  target(ev) {
    const step = this.step(ev, ev.step_id);
    const index = itemIndexOf(ev);
    return index === null ? step : this.item(step, index, ev);
  }

  setStatus(node, status) {
    const before = node.dataset.status;
    node.dataset.status = status;
    if (node.status) node.status.textContent = status;
    if (node.index >= VISIBLE_ITEMS && (before === "error") !== (status === "error")) { // a folded item failed (or ran again)
      node.step.foldedFailed = (node.step.foldedFailed || 0) + (status === "error" ? 1 : -1);
      this.foldLabel(node.step);
    }
  }

  addUsage(node, usage) {
    for (const unit of [node, node.step, node.call].filter(Boolean)) { // an item's tokens count for its step and its call
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

  /** The workflow's own progress: steps started, finished, skipped; forEach counts; anything else as a line. */
  progress(ev, d) {
    if (!d.step_id || !(STEP_STAGES.has(d.stage) || d.items_total !== undefined || d.items_done !== undefined)) {
      this.call(ev).log.append(el("div", { class: "progress", dataset: { event: ev.type, stage: d.stage || "" } }, this.stamp(ev), d.message || d.stage || ""));
      return;
    }
    const step = this.step(ev, d.step_id);
    if (d.stage === "step_started") {
      const name = d.step_id.slice(d.step_id.lastIndexOf("/") + 1);
      step.label.textContent = d.step !== undefined && d.of !== undefined ? `${d.step}/${d.of} ${name}` : name;
      if (d.workflow) step.skill.textContent = `workflow ${d.workflow}`;
      this.setStatus(step, "running");
    } else if (d.stage === "step_finished") {
      step.dur.textContent = ms(d.duration_ms);
      if (step.dataset.status === "running") this.setStatus(step, d.status || "ok");
    } else if (d.stage === "step_cancelled") {
      if (step.dataset.status === "running") this.setStatus(step, "cancelled");
    } else if (d.stage === "step_skipped") {
      this.setStatus(step, "skipped");
      const condition = d.condition ?? d.when;
      step.log.append(el("div", { class: "condition" }, "skipped: ",
        condition !== undefined ? el("code", { text: `when ${typeof condition === "string" ? condition : pretty(condition)}` }) : null,
        condition !== undefined ? " did not hold" : (d.message || "its condition did not hold")));
    }
    if (d.items_total !== undefined || d.items_done !== undefined) this.itemCount(step, d);
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
    if (!ok) { // steps and items still running when the call failed were stopped with it
      for (const unit of call.units) if (unit.dataset.status === "running" || unit.dataset.status === "retrying") this.setStatus(unit, "cancelled");
    }
    if (ok) call.log.append(expandable("output", d.data));
    else {
      call.log.append(el("div", { class: "err-text", text: `${error.code}: ${error.message}` }));
      if (error.details && Object.keys(error.details).length) call.log.append(detailsView(error.details));
    }
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

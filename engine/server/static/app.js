// skillyard web page: tools and their forms, a live timeline, the agent chat, run history.
// Plain JavaScript, no build step, no third-party code. Everything the server sends is put
// in the page as text (textContent) except Markdown, which is rendered from escaped text.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const KEY_STORAGE = "skillyard.apiKey";
const state = { role: null, tools: [], adminTools: null, selected: null, toolRun: null, chat: [], chatAbort: null, runFollow: null };

// ─── small DOM helpers ──────────────────────────────────────────────────────────────────

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function pretty(value) {
  if (typeof value === "string") return value;
  try { return JSON.stringify(value, null, 2); } catch { return String(value); }
}

function expandable(label, value, open = false) {
  const text = pretty(value);
  return el("details", { open }, el("summary", { text: label }), el("pre", { class: "code", text: text.length > 20000 ? text.slice(0, 20000) + "\n…(truncated)" : text }));
}

function ms(value) {
  if (value === null || value === undefined) return "";
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`;
}

function notice(message) {
  const box = $("#notice");
  box.textContent = message || "";
  box.hidden = !message;
}

// ─── the API ────────────────────────────────────────────────────────────────────────────

function headers(extra = {}) {
  const out = { ...extra };
  const key = localStorage.getItem(KEY_STORAGE);
  if (key) out.Authorization = `Bearer ${key}`;
  return out;
}

class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code || `http_${status}`;
    this.body = body;
  }
}

async function api(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (response.status === 204) return null;
  let data = null;
  try { data = await response.json(); } catch { /* not JSON */ }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// Reads a text/event-stream response, calling onEvent(eventObject) for every frame.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).replace(/^ /, "")).join("\n");
      if (!data) continue; // a comment (keep-alive)
      try { onEvent(JSON.parse(data)); } catch (error) { console.error("bad event", error, data); }
    }
  }
}

async function stream(method, path, body, onEvent, signal) {
  const init = { method, headers: headers({ Accept: "text/event-stream" }), signal };
  if (body !== undefined) { init.body = typeof body === "string" ? body : JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  const response = await fetch(path, init);
  if (!response.ok) {
    let data = null;
    try { data = await response.json(); } catch { /* ignore */ }
    throw new ApiError(response.status, data);
  }
  await readEvents(response, onEvent);
  return response.headers.get("X-Run-Id");
}

// ─── Markdown (a safe subset: escaped first, then formatted) ────────────────────────────

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function inlineMarkdown(text) {
  const codes = [];
  let out = escapeHtml(text).replace(/`([^`]+)`/g, (_, code) => { codes.push(code); return `\u0000${codes.length - 1}\u0000`; });
  out = out
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>")
    .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" rel="noopener noreferrer" target="_blank">$1</a>');
  return out.replace(/\u0000(\d+)\u0000/g, (_, i) => `<code>${codes[Number(i)]}</code>`);
}

function renderMarkdown(text) {
  const lines = String(text || "").replace(/\r\n?/g, "\n").split("\n");
  const html = [];
  let list = null;
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) { html.push(`<p>${paragraph.map(inlineMarkdown).join("<br>")}</p>`); paragraph = []; }
    if (list) { html.push(`</${list}>`); list = null; }
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^```/);
    if (fence) {
      flush();
      const code = [];
      for (i++; i < lines.length && !/^```/.test(lines[i]); i++) code.push(lines[i]);
      html.push(`<pre><code>${escapeHtml(code.join("\n"))}</code></pre>`);
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    const bullet = line.match(/^\s*[-*+]\s+(.*)$/);
    const numbered = line.match(/^\s*\d+[.)]\s+(.*)$/);
    const quote = line.match(/^>\s?(.*)$/);
    if (heading) { flush(); const n = Math.min(6, heading[1].length + 2); html.push(`<h${n}>${inlineMarkdown(heading[2])}</h${n}>`); }
    else if (bullet || numbered) {
      if (paragraph.length) { html.push(`<p>${paragraph.map(inlineMarkdown).join("<br>")}</p>`); paragraph = []; }
      const kind = bullet ? "ul" : "ol";
      if (list !== kind) { if (list) html.push(`</${list}>`); html.push(`<${kind}>`); list = kind; }
      html.push(`<li>${inlineMarkdown((bullet || numbered)[1])}</li>`);
    } else if (quote) { flush(); html.push(`<blockquote>${inlineMarkdown(quote[1])}</blockquote>`); }
    else if (!line.trim()) flush();
    else { if (list) { html.push(`</${list}>`); list = null; } paragraph.push(line); }
  }
  flush();
  return html.join("");
}

// ─── the timeline: tool → steps → skill progress ────────────────────────────────────────

class Timeline {
  constructor(root, { runId = null } = {}) {
    this.root = root;
    this.runId = runId;
    this.calls = new Map();
    this.steps = new Map();
    this.models = new Map();
    this.t0 = null;
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

  call(ev) {
    let node = this.calls.get(ev.tool_call_id);
    if (!node) {
      node = el("div", { class: "call", dataset: { toolCallId: ev.tool_call_id || "", status: "running", event: ev.type } });
      node.head = el("div", { class: "head" }, this.stamp(ev), el("strong", { text: (ev.data && ev.data.tool) || "tool" }), el("span", { class: "status", text: "running" }));
      node.dur = el("span", { class: "dur" });
      node.head.append(node.dur);
      node.log = el("div");
      node.stepBox = el("div", { class: "steps" });
      node.append(node.head, node.log, node.stepBox);
      this.calls.set(ev.tool_call_id, node);
      this.root.append(node);
    }
    return node;
  }

  step(ev) {
    const key = `${ev.tool_call_id}\u0000${ev.step_id}`;
    let node = this.steps.get(key);
    if (!node) {
      const call = this.call(ev);
      node = el("div", { class: "step", dataset: { stepId: ev.step_id || "", status: "running" } });
      node.label = el("strong", { text: ev.step_id || "step" });
      node.skill = el("span", { class: "muted" });
      node.status = el("span", { class: "status", text: "running" });
      node.dur = el("span", { class: "dur" });
      node.head = el("div", { class: "head" }, this.stamp(ev), node.label, node.skill, node.status, node.dur);
      node.log = el("div");
      node.append(node.head, node.log);
      call.stepBox.append(node);
      this.steps.set(key, node);
    }
    return node;
  }

  setStatus(node, status) {
    node.dataset.status = status;
    const badge = node.head && node.head.querySelector(".status");
    if (badge) badge.textContent = status;
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
      case "tool_call_start": {
        const node = this.call(ev);
        node.log.append(expandable("arguments", d.arguments));
        break;
      }
      case "tool_progress_delta": {
        if (d.stage === "step_started" && d.step_id) {
          const step = this.step({ ...ev, step_id: d.step_id });
          step.label.textContent = `${d.step}/${d.of} ${d.step_id}`;
        } else if (d.stage === "step_finished" && d.step_id) {
          const step = this.step({ ...ev, step_id: d.step_id });
          step.dur.textContent = ms(d.duration_ms);
        } else {
          this.call(ev).log.append(el("div", { class: "progress", dataset: { event: ev.type } }, this.stamp(ev), d.message || d.stage || ""));
        }
        break;
      }
      case "skill_start": {
        const step = this.step(ev);
        step.skill.textContent = `${ev.skill}${d.kind ? ` (${d.kind})` : ""}${d.attempt > 1 ? ` · attempt ${d.attempt}` : ""}`;
        this.setStatus(step, "running");
        step.log.append(expandable("input", d.input));
        break;
      }
      case "skill_progress_delta":
        this.step(ev).log.append(el("div", { class: "progress", dataset: { event: ev.type } }, this.stamp(ev), d.message || d.stage || ""));
        break;
      case "model_exchange":
        this.step(ev).log.append(expandable(`prompt and answer (${d.model}, attempt ${d.attempt})`, { messages: d.messages, response: d.response }));
        break;
      case "skill_result": {
        const step = this.step(ev);
        this.setStatus(step, "ok");
        if (d.duration_ms !== undefined) step.dur.textContent = ms(d.duration_ms);
        step.log.append(expandable("output", d.output));
        break;
      }
      case "skill_error": {
        const step = this.step(ev);
        this.setStatus(step, "error");
        step.log.append(el("div", { class: "err-text", text: `${d.code || "error"}: ${d.message || ""}` }));
        if (d.details) step.log.append(expandable("details", d.details));
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
      case "tool_call_error": {
        const call = this.call(ev);
        const ok = ev.type === "tool_call_result";
        const error = d.error || {};
        this.setStatus(call, ok ? "ok" : (error.code === "cancelled" ? "cancelled" : "error"));
        call.dataset.event = ev.type;
        if (call.approval) call.approval.remove();
        call.dur.textContent = ms((d.metadata || {}).duration_ms);
        if (ok) call.log.append(expandable("output", d.data));
        else {
          call.log.append(el("div", { class: "err-text", text: `${error.code}: ${error.message}` }));
          if (error.details && Object.keys(error.details).length) call.log.append(expandable("details", error.details));
        }
        break;
      }
      case "final_answer_delta": {
        const box = el("div", { class: "assistant-text" });
        box.innerHTML = renderMarkdown(d.text || "");
        this.row(ev, el("strong", { text: "answer" }), el("div", { class: "final" }, box));
        break;
      }
      case "agent_error":
        this.row(ev, el("span", { class: "err-text", text: `agent error: ${d.message}` }));
        break;
      case "agent_done":
        this.row(ev, el("strong", { text: "done" }), ` · ${d.stop_reason} · ${d.steps} step(s) · ${ms(d.duration_ms)}` +
          (d.usage ? ` · ${d.usage.input_tokens} in / ${d.usage.output_tokens} out tokens` : ""));
        break;
      default:
        this.row(ev, el("strong", { text: ev.type }), expandable("data", d));
    }
    this.root.dataset.lastType = ev.type;
    this.root.dataset.lastSeq = ev.seq;
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

// ─── forms from JSON Schema ─────────────────────────────────────────────────────────────

function fieldFor(name, schema, required) {
  schema = schema || {};
  const id = `arg-${name}`;
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  const label = el("label", { for: id }, name, required ? el("span", { class: "req", text: " *" }) : null,
                   type ? el("span", { class: "muted", text: ` (${type})` }) : null);
  const help = schema.description ? el("div", { class: "help", text: schema.description }) : null;
  let input;
  let read;
  const hasDefault = schema.default !== undefined;
  if (Array.isArray(schema.enum)) {
    input = el("select", { id, name });
    if (!required) input.append(el("option", { value: "", text: "—" }));
    schema.enum.forEach((value, index) => input.append(el("option", { value: String(index), text: JSON.stringify(value) })));
    if (hasDefault) input.value = String(schema.enum.findIndex((v) => JSON.stringify(v) === JSON.stringify(schema.default)));
    read = () => (input.value === "" ? undefined : schema.enum[Number(input.value)]);
  } else if (type === "boolean") {
    input = el("input", { id, name, type: "checkbox" });
    input.checked = schema.default === true;
    read = () => input.checked;
  } else if (type === "integer" || type === "number") {
    input = el("input", { id, name, type: "number", step: type === "integer" ? "1" : "any", min: schema.minimum, max: schema.maximum, required });
    if (hasDefault) input.value = String(schema.default);
    read = () => {
      if (input.value.trim() === "") return undefined;
      const value = Number(input.value);
      if (Number.isNaN(value)) throw new Error(`${name}: not a number`);
      return value;
    };
  } else if (type === "string") {
    const short = schema.maxLength !== undefined && schema.maxLength <= 120 || schema.format || schema.pattern;
    input = short ? el("input", { id, name, type: "text", maxlength: schema.maxLength, required })
                  : el("textarea", { id, name, rows: 4, required });
    if (hasDefault) input.value = String(schema.default);
    read = () => (input.value === "" && !required ? undefined : input.value);
  } else if (type === "array" && schema.items && ["string", "number", "integer"].includes(schema.items.type)) {
    input = el("textarea", { id, name, rows: 3, placeholder: "one item per line" });
    if (Array.isArray(schema.default)) input.value = schema.default.join("\n");
    read = () => {
      const items = input.value.split("\n").map((s) => s.trim()).filter(Boolean);
      if (!items.length && !required) return undefined;
      return schema.items.type === "string" ? items : items.map(Number);
    };
  } else {
    input = el("textarea", { id, name, rows: 4, class: "code", placeholder: "JSON" });
    if (hasDefault) input.value = JSON.stringify(schema.default, null, 2);
    read = () => {
      if (input.value.trim() === "") return undefined;
      try { return JSON.parse(input.value); } catch (error) { throw new Error(`${name}: not valid JSON (${error.message})`); }
    };
  }
  return { node: el("div", { class: "field" }, label, input, help), read };
}

function buildForm(container, schema) {
  container.replaceChildren();
  const properties = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const fields = Object.entries(properties).map(([name, sub]) => {
    const field = fieldFor(name, sub, required.has(name));
    container.append(field.node);
    return [name, field];
  });
  if (!fields.length) container.append(el("div", { class: "muted", text: "This tool takes no arguments." }));
  return () => {
    const args = {};
    for (const [name, field] of fields) {
      const value = field.read();
      if (value !== undefined) args[name] = value;
    }
    return args;
  };
}

// ─── tools view ─────────────────────────────────────────────────────────────────────────

async function loadTools() {
  try {
    state.tools = await api("GET", "/v1/tools?format=mcp");
  } catch (error) {
    state.tools = [];
    notice(error.status === 401 ? "This server needs an API key: enter it at the top right." : `Could not list tools: ${error.message}`);
  }
  state.adminTools = null;
  if (state.role === "admin") {
    try { state.adminTools = await api("GET", "/v1/admin/tools"); } catch { state.adminTools = null; }
  }
  renderToolList();
}

function renderToolList() {
  const list = $("#tool-list");
  list.replaceChildren();
  const rows = state.adminTools
    ? state.adminTools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.parameters, enabled: t.enabled, source: t.source, type: t.type, confirm: t.confirm }))
    : state.tools.map((t) => ({ ...t, enabled: true }));
  for (const tool of rows) {
    const item = el("li", { class: `${tool.enabled ? "" : "disabled"} ${state.selected === tool.name ? "selected" : ""}`, dataset: { tool: tool.name } },
      el("div", {}, el("div", { class: "name", text: tool.name }),
        el("div", { class: "meta", text: [tool.type, tool.source, tool.confirm ? "asks approval" : null].filter(Boolean).join(" · ") })));
    item.addEventListener("click", () => selectTool(tool));
    if (state.adminTools) {
      const toggle = el("input", { type: "checkbox", class: "switch", title: "enabled", "aria-label": `enable ${tool.name}` });
      toggle.checked = !!tool.enabled;
      toggle.addEventListener("click", (event) => event.stopPropagation());
      toggle.addEventListener("change", async () => {
        try {
          await api("PATCH", `/v1/admin/tools/${encodeURIComponent(tool.name)}`, { enabled: toggle.checked });
          notice("");
          await loadTools();
        } catch (error) {
          toggle.checked = !toggle.checked;
          notice(`Could not change ${tool.name}: ${error.message}`);
        }
      });
      item.append(toggle);
    }
    list.append(item);
  }
  if (!rows.length) list.append(el("li", { class: "muted", text: "No tools." }));
}

function selectTool(tool) {
  state.selected = tool.name;
  for (const li of document.querySelectorAll("#tool-list li")) li.classList.toggle("selected", li.dataset.tool === tool.name);
  $("#tool-empty").hidden = true;
  $("#tool-detail").hidden = false;
  $("#tool-title").textContent = tool.name;
  $("#tool-description").textContent = tool.description || "";
  state.readArgs = buildForm($("#tool-fields"), tool.inputSchema || { type: "object" });
  $("#raw-toggle").checked = false;
  $("#raw-json").hidden = true;
  $("#tool-fields").hidden = false;
  $("#form-error").hidden = true;
  $("#tool-status").textContent = "";
  $("#tool-result-box").hidden = true;
  new Timeline($("#tool-timeline"));
}

function currentArgs() {
  if ($("#raw-toggle").checked) {
    const text = $("#raw-json").value.trim();
    return text ? text : "{}"; // sent as written: the server reports what is wrong with it
  }
  return JSON.stringify(state.readArgs());
}

async function runTool(event) {
  event.preventDefault();
  const name = state.selected;
  if (!name) return;
  const errorBox = $("#form-error");
  errorBox.hidden = true;
  let body;
  try { body = currentArgs(); } catch (error) { errorBox.textContent = error.message; errorBox.hidden = false; return; }
  const timeline = new Timeline($("#tool-timeline"));
  const controller = new AbortController();
  state.toolRun = controller;
  $("#run-tool").disabled = true;
  $("#stop-tool").hidden = false;
  $("#tool-status").textContent = "running…";
  $("#tool-result-box").hidden = true;
  const background = $("#tool-background").checked ? "?background=true" : "";
  let last = null;
  try {
    await stream("POST", `/v1/tools/${encodeURIComponent(name)}/call${background}`, body, (ev) => {
      timeline.add(ev);
      last = ev;
    }, controller.signal);
    if (last && (last.type === "tool_call_result" || last.type === "tool_call_error")) {
      $("#tool-status").textContent = last.type === "tool_call_result" ? `done in ${ms((last.data.metadata || {}).duration_ms)}` : `failed: ${last.data.error.code}`;
      $("#tool-result").textContent = pretty(last.type === "tool_call_result" ? last.data.data : last.data.error);
      $("#tool-result-box").hidden = false;
      $("#tool-result-box").open = true;
    }
  } catch (error) {
    $("#tool-status").textContent = error.name === "AbortError" ? "stopped" : "";
    if (error.name !== "AbortError") { errorBox.textContent = error.message; errorBox.hidden = false; }
  } finally {
    $("#run-tool").disabled = false;
    $("#stop-tool").hidden = true;
    state.toolRun = null;
  }
}

// ─── chat view (the agent loop) ─────────────────────────────────────────────────────────

async function loadModels() {
  const select = $("#chat-model");
  try {
    const models = await api("GET", "/v1/models");
    select.replaceChildren(...models.models.map((name) => el("option", { value: name, text: name })));
    select.value = models.default;
  } catch { /* shown by loadTools */ }
}

function assistantPanel() {
  const card = el("div", { class: "assistant-card" });
  const node = el("div", { class: "msg-assistant" }, el("div", { class: "avatar", text: "AI" }), card);
  $("#chat-messages").append(node);
  return { node, card, parts: [], calls: new Map(), text: null, loading: null };
}

function lastTextPart(panel) {
  const last = panel.parts[panel.parts.length - 1];
  if (last && last.type === "text") return last;
  const part = { type: "text", text: "", node: el("div", { class: "assistant-text" }) };
  panel.parts.push(part);
  panel.card.insertBefore(part.node, panel.loading);
  return part;
}

function onChatEvent(panel, ev) {
  const d = ev.data || {};
  if (ev.type === "model_text_delta") {
    const part = lastTextPart(panel);
    part.text += d.text || "";
    part.node.innerHTML = renderMarkdown(part.text);
  } else if (ev.type === "tool_call_start") {
    const timeline = el("div", { class: "timeline" });
    const part = { type: "tool-call", state: "call", node: el("div", { class: "part-tool", dataset: { toolCallId: ev.tool_call_id, state: "call" } }) };
    part.timeline = new Timeline(timeline);
    part.node.append(el("div", {}, el("span", { class: "status", text: "tool" }), " ", el("strong", { text: d.tool }), el("span", { class: "muted", text: " — calling" })), timeline);
    part.timeline.add(ev);
    panel.parts.push(part);
    panel.calls.set(ev.tool_call_id, part);
    panel.card.insertBefore(part.node, panel.loading);
  } else if (ev.tool_call_id && panel.calls.has(ev.tool_call_id)) {
    const part = panel.calls.get(ev.tool_call_id);
    part.timeline.add(ev);
    if (ev.type === "tool_call_result" || ev.type === "tool_call_error") {
      part.state = "result";
      part.node.dataset.state = ev.type === "tool_call_result" ? "result" : "error";
      part.node.querySelector(".muted").textContent = ev.type === "tool_call_result" ? " — done" : ` — failed (${(d.error || {}).code})`;
    }
  } else if (ev.type === "final_answer_delta") {
    const part = lastTextPart(panel);
    part.text = d.text || "";
    part.node.innerHTML = renderMarkdown(part.text);
  } else if (ev.type === "agent_error") {
    panel.card.insertBefore(el("div", { class: "err-text", text: d.message || "the agent failed" }), panel.loading);
  } else if (ev.type === "agent_done") {
    panel.done = d;
  }
}

async function sendChat(event) {
  event.preventDefault();
  const text = $("#chat-text").value.trim();
  if (!text || state.chatAbort) return;
  $("#chat-text").value = "";
  state.chat.push({ role: "user", content: text });
  $("#chat-messages").append(el("div", { class: "msg-user", text }));
  const panel = assistantPanel();
  panel.loading = el("div", { class: "dots" }, el("span"), el("span"), el("span"));
  panel.card.append(panel.loading);
  const controller = new AbortController();
  state.chatAbort = controller;
  $("#chat-send").disabled = true;
  $("#chat-stop").hidden = false;
  const body = { messages: state.chat, enable_tools: $("#chat-tools").checked };
  if ($("#chat-model").value) body.model = $("#chat-model").value;
  try {
    await stream("POST", "/v1/agent", body, (ev) => onChatEvent(panel, ev), controller.signal);
  } catch (error) {
    panel.card.append(el("div", { class: "err-text", text: error.name === "AbortError" ? "Stopped." : error.message }));
  } finally {
    panel.loading.remove();
    const hasText = panel.parts.some((p) => p.type === "text" && p.text.trim());
    const hasCall = panel.parts.some((p) => p.type === "tool-call");
    const done = panel.done || {};
    if (hasText) state.chat.push({ role: "assistant", content: done.answer || panel.parts.filter((p) => p.type === "text").map((p) => p.text).join("\n") });
    else if (hasCall) panel.card.append(el("div", { class: "muted", text: `(The tool-call limit was reached or the run stopped: ${done.stop_reason || "no answer"}; no final answer.)` }));
    else if (!panel.card.querySelector(".err-text")) panel.card.append(el("div", { class: "err-text", text: "The model returned nothing." }));
    panel.node.dataset.stopReason = done.stop_reason || "none";
    state.chatAbort = null;
    $("#chat-send").disabled = false;
    $("#chat-stop").hidden = true;
  }
}

// ─── runs view ──────────────────────────────────────────────────────────────────────────

async function loadRuns() {
  const body = $("#runs-body");
  try {
    const runs = await api("GET", "/v1/runs?limit=100");
    body.replaceChildren(...runs.map((run) => {
      const row = el("tr", { dataset: { runId: run.id } },
        el("td", { text: new Date(run.started_at).toLocaleString() }),
        el("td", { text: run.kind || "" }),
        el("td", { text: run.name || "" }),
        el("td", { class: `st-${run.status}`, text: run.status + (run.pending_approvals && run.pending_approvals.length ? " (needs approval)" : "") }),
        el("td", { text: ms(run.duration_ms) }),
        el("td", { class: "code", text: run.id }));
      row.addEventListener("click", () => showRun(run.id));
      return row;
    }));
    if (!runs.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 6, class: "muted", text: "No runs yet." })));
  } catch (error) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: 6, class: "error", text: error.message })));
  }
}

async function showRun(runId) {
  if (state.runFollow) state.runFollow.abort();
  const controller = new AbortController();
  state.runFollow = controller;
  $("#run-detail").hidden = false;
  $("#run-title").textContent = runId;
  const timeline = new Timeline($("#run-timeline"), { runId });
  try {
    const run = await api("GET", `/v1/runs/${encodeURIComponent(runId)}`);
    $("#run-meta").textContent = `${run.kind} ${run.name} · ${run.status}${run.duration_ms !== null && run.duration_ms !== undefined ? ` · ${ms(run.duration_ms)}` : ""}`;
    $("#run-cancel").hidden = !run.live;
    $("#run-cancel").onclick = async () => { try { await api("POST", `/v1/runs/${encodeURIComponent(run.id)}/cancel`); } catch (error) { notice(error.message); } };
    await stream("GET", `/v1/runs/${encodeURIComponent(run.id)}/events`, undefined, (ev) => timeline.add(ev), controller.signal);
    $("#run-cancel").hidden = true;
  } catch (error) {
    if (error.name !== "AbortError") $("#run-meta").textContent = error.message;
  }
}

// ─── wiring ─────────────────────────────────────────────────────────────────────────────

function show(view) {
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.view === view);
  for (const name of ["tools", "chat", "runs"]) $(`#view-${name}`).hidden = name !== view;
  if (view === "runs") loadRuns();
}

async function whoami() {
  try {
    const me = await api("GET", "/v1/whoami");
    state.role = me.role;
    $("#role-badge").textContent = me.auth ? me.role : "local (no keys)";
    notice("");
  } catch (error) {
    state.role = null;
    $("#role-badge").textContent = error.status === 401 ? "no valid key" : "offline";
  }
}

async function start() {
  $("#api-key").value = localStorage.getItem(KEY_STORAGE) || "";
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => show(tab.dataset.view));
  $("#auth-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = $("#api-key").value.trim();
    if (key) localStorage.setItem(KEY_STORAGE, key); else localStorage.removeItem(KEY_STORAGE);
    await whoami();
    await Promise.all([loadTools(), loadModels()]);
  });
  $("#tool-form").addEventListener("submit", runTool);
  $("#stop-tool").addEventListener("click", () => state.toolRun && state.toolRun.abort());
  $("#raw-toggle").addEventListener("change", () => {
    const raw = $("#raw-toggle").checked;
    if (raw) {
      try { $("#raw-json").value = JSON.stringify(state.readArgs(), null, 2); } catch { $("#raw-json").value = "{}"; }
    }
    $("#raw-json").hidden = !raw;
    $("#tool-fields").hidden = raw;
  });
  $("#chat-form").addEventListener("submit", sendChat);
  $("#chat-text").addEventListener("keydown", (event) => { if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) sendChat(event); });
  $("#chat-stop").addEventListener("click", () => state.chatAbort && state.chatAbort.abort());
  $("#chat-clear").addEventListener("click", () => { state.chat = []; $("#chat-messages").replaceChildren(); });
  $("#runs-refresh").addEventListener("click", loadRuns);
  await whoami();
  await Promise.all([loadTools(), loadModels()]);
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", start);

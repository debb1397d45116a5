// skillyard web page: tools and their forms, a live timeline, the agent chat, run history, batches.
// Plain JavaScript modules, no build step, no third-party code. Everything the server sends
// is put in the page as text; Markdown is built from DOM nodes (markdown.js), never innerHTML.
"use strict";

import { KEY_STORAGE, api, stream } from "./api.js";
import { $, el, ms, notice, usageText, valueView, wordBreaks } from "./dom.js";
import { hideBatch, loadBatches, showBatch } from "./batches.js";
import { loadBroken, markBroken, reloadProject, showBrokenBox } from "./broken.js";
import { FormError, buildForm } from "./forms.js";
import { closeEditor, openEditor, setupEditor } from "./editor.js";
import { loadChat, loadConversation, wireChat } from "./chat.js";
import { Timeline } from "./timeline.js";

const REDACTED = "[REDACTED]";
const state = { role: null, tools: [], adminTools: null, broken: {}, selected: null, selectedTool: null, form: null, toolRun: null, runFollow: null, runs: [] };

// ─── tools view ─────────────────────────────────────────────────────────────────────────

async function loadTools() {
  $("#reload-project").hidden = state.role !== "admin";
  $("#new-tool").hidden = state.role !== "admin";
  const broken = loadBroken();
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
  state.broken = await broken;
  renderToolList();
  refreshSelected();
}

/** After a reload: the open tool's detail follows its new state (broken, fixed, gone). */
function refreshSelected() {
  if (!state.selected) return;
  const now = toolRows().find((t) => t.name === state.selected);
  const key = (t) => JSON.stringify(t ? [t.broken || false, t.serving || false, t.problems || [], t.inputSchema || null] : null);
  if (!now) {
    state.selected = null;
    $("#tool-detail").hidden = true;
    $("#tool-empty").hidden = false;
  } else if (key(now) !== key(state.selectedTool)) selectTool(now);
}

function toolRows() {
  const rows = state.adminTools
    ? state.adminTools.map((t) => ({ name: t.name, title: t.title, description: t.description, inputSchema: t.parameters, enabled: t.enabled, source: t.source, type: t.type, confirm: t.confirm }))
    : state.tools.map((t) => ({ ...t, enabled: true }));
  return markBroken(rows, state.broken);
}

function enableSwitch(tool) {
  const toggle = el("input", { type: "checkbox", class: "switch", id: `enable-${tool.name}` });
  toggle.checked = !!tool.enabled;
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
  const label = el("label", { class: "switch-label", for: toggle.id, title: `enable or disable ${tool.name}` }, toggle,
    el("span", { class: "sr-only", text: `${tool.name} enabled` }), el("span", { class: "switch-text", "aria-hidden": "true", text: "on" }));
  label.addEventListener("click", (event) => event.stopPropagation()); // toggling is not selecting
  return label;
}

function renderToolList() {
  const list = $("#tool-list");
  list.replaceChildren();
  const rows = toolRows();
  for (const tool of rows) {
    const classes = [tool.enabled ? "" : "disabled", state.selected === tool.name ? "selected" : "", tool.broken ? "broken" : ""];
    const item = el("li", { class: classes.filter(Boolean).join(" "), dataset: tool.broken ? { tool: tool.name, broken: tool.serving ? "serving" : "down" } : { tool: tool.name } },
      el("div", {}, el("div", { class: "name", title: tool.name }, wordBreaks(tool.title || tool.name)),
        tool.title ? el("div", { class: "meta tool-name", text: tool.name }) : null,
        tool.broken ? el("div", { class: "broken-tag", text: `broken · ${tool.problems.length} problem${tool.problems.length === 1 ? "" : "s"}${tool.serving ? " · runs its last good version" : ""}` }) : null,
        el("div", { class: "meta", text: [tool.type, tool.source, tool.confirm ? "asks approval" : null].filter(Boolean).join(" · ") })));
    item.addEventListener("click", () => selectTool(tool));
    if (state.adminTools && !(tool.broken && !tool.serving)) item.append(enableSwitch(tool));
    list.append(item);
  }
  if (!rows.length) list.append(el("li", { class: "muted", text: "No tools." }));
}

function selectTool(tool) {
  state.selected = tool.name;
  state.selectedTool = tool;
  for (const li of document.querySelectorAll("#tool-list li")) li.classList.toggle("selected", li.dataset.tool === tool.name);
  $("#tool-empty").hidden = true;
  $("#tool-detail").hidden = false;
  closeEditor();
  $("#tool-title").replaceChildren(wordBreaks(tool.title || tool.name));
  $("#tool-name-line").textContent = tool.name;
  $("#tool-name-line").hidden = !tool.title;
  $("#edit-tool").hidden = !state.adminTools;
  $("#tool-description").textContent = tool.description || "";
  state.form = buildForm($("#tool-fields"), tool.inputSchema || { type: "object" });
  setRaw(false);
  formError("");
  clearRun();
  showBrokenBox(tool);
}

/** No earlier call's status, timeline or result on screen (a new tool, or arguments refused before sending). */
function clearRun() {
  $("#tool-status").textContent = "";
  $("#tool-result-box").hidden = true;
  new Timeline($("#tool-timeline"));
}

function setRaw(raw, text) {
  $("#raw-toggle").checked = raw;
  if (raw) $("#raw-json").value = text ?? (() => { try { return JSON.stringify(state.form.read(), null, 2); } catch { return "{}"; } })();
  $("#raw-json").hidden = !raw;
  $("#tool-fields").hidden = raw;
}

function formError(message) {
  $("#form-error").textContent = message;
  $("#form-error").hidden = !message;
}

function currentArgs() {
  if ($("#raw-toggle").checked) {
    const text = $("#raw-json").value.trim();
    return text ? text : "{}"; // sent as written: the server reports what is wrong with it
  }
  return JSON.stringify(state.form.read());
}

function showResult(last) {
  const ok = last.type === "tool_call_result";
  $("#tool-status").textContent = ok ? `done in ${ms((last.data.metadata || {}).duration_ms)}` : `failed: ${last.data.error.code}`;
  const value = ok ? last.data.data : last.data.error;
  $("#tool-result").replaceChildren(valueView(value));
  $("#tool-result").dataset.kind = typeof value === "string" ? "text" : "json";
  $("#tool-result-box").hidden = false;
  $("#tool-result-box").open = true;
}

async function runTool(event) {
  event.preventDefault();
  const name = state.selected;
  if (!name || $("#tool-runner").hidden) return; // a broken tool that cannot run gets no call
  formError("");
  let body;
  try { body = currentArgs(); } catch (error) {
    clearRun();
    formError(error instanceof FormError ? `Not sent: ${error.message}.` : error.message);
    return;
  }
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
    await stream("POST", `/v1/tools/${encodeURIComponent(name)}/call${background}`, body, (ev) => { timeline.add(ev); last = ev; }, controller.signal);
    if (last && (last.type === "tool_call_result" || last.type === "tool_call_error")) showResult(last);
  } catch (error) {
    $("#tool-status").textContent = error.name === "AbortError" ? "stopped" : "";
    if (error.name !== "AbortError") formError(error.message);
  } finally {
    $("#run-tool").disabled = false;
    $("#stop-tool").hidden = true;
    state.toolRun = null;
  }
}

// ─── chat view: chat.js ─────────────────────────────────────────────────────────────────

// ─── runs view ──────────────────────────────────────────────────────────────────────────

function runMatches(run, kind, terms) {
  if (kind && run.kind !== kind) return false;
  if (!terms.length) return true;
  const error = run.error || {};
  const haystack = [run.id, run.kind, run.name, run.status, error.code, error.message, JSON.stringify(run.input ?? "")].join(" ").toLowerCase();
  return terms.every((term) => haystack.includes(term));
}

const PROMPT_CHARS = 90; // an agent run's prompt in the list, cut; whole in its title

/** The text of an agent run's last user message (its prompt), or null. */
function promptOf(run) {
  const messages = Array.isArray(run.input) ? run.input : [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (!m || m.role !== "user") continue;
    const parts = Array.isArray(m.content) ? m.content.filter((p) => p && typeof p.text === "string").map((p) => p.text) : [m.content];
    const text = parts.filter((p) => typeof p === "string").join(" ").replace(/\s+/g, " ").trim();
    if (text) return text;
  }
  return null;
}

/** The Name cell: a tool run by its tool; an agent run by its prompt, its model aside (many runs share one model). */
function runNameCell(run) {
  const prompt = run.kind === "agent" ? promptOf(run) : null;
  if (!prompt) return el("td", { text: run.name || "" });
  const shown = prompt.length > PROMPT_CHARS ? `${prompt.slice(0, PROMPT_CHARS - 1)}…` : prompt;
  return el("td", { class: "run-prompt", title: prompt }, shown, el("span", { class: "muted", text: ` · ${run.name || ""}` }));
}

function runRow(run) {
  const error = run.error && typeof run.error === "object" ? run.error : null;
  const status = run.status + (error && error.code ? ` · ${error.code}` : "") + (run.pending_approvals && run.pending_approvals.length ? " (needs approval)" : "");
  const row = el("tr", { dataset: { runId: run.id, status: run.status, kind: run.kind || "" }, tabindex: "0" },
    el("td", { text: new Date(run.started_at).toLocaleString() }),
    el("td", { class: "col-kind", text: run.kind || "" }),
    runNameCell(run),
    el("td", { class: `st-${run.status}`, text: status, title: error && error.message ? error.message : null }),
    el("td", { class: "col-dur", text: ms(run.duration_ms) }),
    el("td", { class: "code col-id", text: run.id }));
  const open = () => openRun(run.id);
  row.addEventListener("click", open);
  row.addEventListener("keydown", (event) => { if (event.key === "Enter") open(); });
  return row;
}

function renderRuns() {
  const kind = $("#runs-kind").value;
  const terms = $("#runs-search").value.toLowerCase().split(/\s+/).filter(Boolean);
  const shown = state.runs.filter((run) => runMatches(run, kind, terms));
  const body = $("#runs-body");
  body.replaceChildren(...shown.map(runRow));
  if (!shown.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 6, class: "muted", text: state.runs.length ? "No run matches." : "No runs yet." })));
  $("#runs-count").textContent = state.runs.length ? `${shown.length} of ${state.runs.length} run${state.runs.length === 1 ? "" : "s"}` : "";
}

async function loadRuns() {
  const status = $("#runs-status").value;
  try {
    state.runs = await api("GET", `/v1/runs?limit=200${status ? `&status=${encodeURIComponent(status)}` : ""}`);
    renderRuns();
  } catch (error) {
    state.runs = [];
    $("#runs-body").replaceChildren(el("tr", {}, el("td", { colspan: 6, class: "error", text: error.message })));
  }
}

function openRun(runId) {
  const hash = `#runs/${encodeURIComponent(runId)}`;
  if (location.hash === hash) showRun(runId); else location.hash = hash; // onRoute shows it
}

function runAgainButton(run) {
  const button = $("#run-again");
  button.hidden = !(run.kind === "tool" || run.kind === "agent");
  button.textContent = run.kind === "agent" ? "Ask again with this conversation" : "Run again with these arguments";
  button.onclick = () => (run.kind === "agent" ? askAgain(run) : runAgain(run));
}

async function showRun(runId) {
  if (state.runFollow) state.runFollow.abort();
  const controller = new AbortController();
  state.runFollow = controller;
  show("runs", { keepHash: true });
  $("#run-detail").hidden = false;
  $("#run-title").textContent = runId;
  $("#run-again").hidden = true;
  const timeline = new Timeline($("#run-timeline"));
  try {
    const run = await api("GET", `/v1/runs/${encodeURIComponent(runId)}`);
    $("#run-title").textContent = run.id;
    $("#run-meta").textContent = `${run.kind} ${run.name} · ${run.status}${run.duration_ms !== null && run.duration_ms !== undefined ? ` · ${ms(run.duration_ms)}` : ""}${run.usage ? ` · ${usageText(run.usage)}` : ""}`;
    runAgainButton(run);
    $("#run-cancel").hidden = !run.live;
    $("#run-cancel").onclick = async () => { try { await api("POST", `/v1/runs/${encodeURIComponent(run.id)}/cancel`); } catch (error) { notice(error.message); } };
    await stream("GET", `/v1/runs/${encodeURIComponent(run.id)}/events`, undefined, (ev) => timeline.add(ev), controller.signal);
    $("#run-cancel").hidden = true;
  } catch (error) {
    if (error.name !== "AbortError") $("#run-meta").textContent = error.message;
  }
}

/** Opens the tool's form filled with a past run's arguments (redacted values must be typed again). */
function runAgain(run) {
  const tool = toolRows().find((t) => t.name === run.name);
  if (!tool) { notice(`The tool ${run.name} is not available now (disabled, removed, or not allowed for this key).`); return; }
  notice("");
  show("tools");
  selectTool(tool);
  const args = run.input && typeof run.input === "object" && !Array.isArray(run.input) ? run.input : {};
  const redacted = Object.keys(args).filter((name) => args[name] === REDACTED);
  const kept = Object.fromEntries(Object.entries(args).filter(([name]) => !redacted.includes(name)));
  if (!state.form.write(kept)) setRaw(true, JSON.stringify(args, null, 2));
  for (const name of redacted) {
    const field = state.form.field(name);
    if (field && !$("#raw-toggle").checked) field.fail(`${name} was redacted in the run's record: enter it again`);
  }
  $("#tool-status").textContent = `arguments of ${run.id}${redacted.length ? ` (re-enter: ${redacted.join(", ")})` : ""}`;
}

function askAgain(run) {
  show("chat");
  loadConversation(run.input, run.name);
  $("#chat-text").focus();
}

// ─── wiring ─────────────────────────────────────────────────────────────────────────────

function show(view, { keepHash = false } = {}) {
  for (const tab of document.querySelectorAll(".tab")) {
    tab.classList.toggle("active", tab.dataset.view === view);
    if (tab.dataset.view === view) tab.setAttribute("aria-current", "page"); else tab.removeAttribute("aria-current");
  }
  for (const name of VIEWS) $(`#view-${name}`).hidden = name !== view;
  if (!keepHash && location.hash !== `#${view}`) history.replaceState(null, "", `#${view}`);
  if (view === "runs") loadRuns();
  if (view === "batches") {
    if (!keepHash) hideBatch(); // the tab: the list; a batch's link (#batches/<id>) keeps its detail
    loadBatches();
  }
}

const VIEWS = ["tools", "chat", "runs", "batches"];

/** `#runs/<id>` opens a run, `#batches/<id>` a batch (links to share); `#tools`, `#chat`, `#runs`, `#batches` a view. */
function onRoute() {
  const run = location.hash.match(/^#runs\/(.+)$/);
  const batch = location.hash.match(/^#batches\/(.+)$/);
  if (run) showRun(decodeURIComponent(run[1]));
  else if (batch) {
    show("batches", { keepHash: true });
    showBatch(decodeURIComponent(batch[1]));
  } else if (VIEWS.map((v) => `#${v}`).includes(location.hash)) {
    if (location.hash === "#batches") hideBatch();
    show(location.hash.slice(1), { keepHash: true });
  }
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

function wire() {
  $("#api-key").value = localStorage.getItem(KEY_STORAGE) || "";
  for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => show(tab.dataset.view));
  $("#auth-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = $("#api-key").value.trim();
    if (key) localStorage.setItem(KEY_STORAGE, key); else localStorage.removeItem(KEY_STORAGE);
    await whoami();
    await Promise.all([loadTools(), loadChat()]);
  });
  $("#tool-form").addEventListener("submit", runTool);
  $("#stop-tool").addEventListener("click", () => state.toolRun && state.toolRun.abort());
  $("#raw-toggle").addEventListener("change", () => setRaw($("#raw-toggle").checked));
  wireChat();
  $("#runs-refresh").addEventListener("click", loadRuns);
  $("#runs-status").addEventListener("change", loadRuns);
  $("#runs-kind").addEventListener("change", renderRuns);
  $("#runs-search").addEventListener("input", renderRuns);
  $("#batches-refresh").addEventListener("click", () => {
    const open = location.hash.match(/^#batches\/(.+)$/);
    loadBatches();
    if (open) showBatch(decodeURIComponent(open[1]));
  });
  setupEditor({ changed: afterEdit, closed: () => { const tool = toolRows().find((t) => t.name === state.selected); if (tool) selectTool(tool); else $("#tool-empty").hidden = false; } });
  $("#new-tool").addEventListener("click", () => openEditor(null));
  $("#edit-tool").addEventListener("click", () => openEditor((state.adminTools || []).find((t) => t.name === state.selected) || null));
  $("#reload-project").addEventListener("click", async () => {
    await reloadProject();
    await loadTools();
  });
  window.addEventListener("hashchange", onRoute);
}

/** After the editor saved, deleted or reset a tool: the list again, and that tool open (if it is still there). */
async function afterEdit(name) {
  await loadTools();
  const tool = name && toolRows().find((t) => t.name === name);
  if (tool) selectTool(tool);
  else {
    state.selected = null;
    $("#tool-detail").hidden = true;
    $("#tool-empty").hidden = false;
  }
}

async function start() {
  wire();
  await whoami();
  await Promise.all([loadTools(), loadChat()]);
  onRoute();
  document.body.dataset.ready = "true";
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();


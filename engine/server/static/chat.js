// The chat view: the agent loop, one session per conversation (docs/server.md, "The web page").
// Each conversation is a session on the server (POST /v1/agent's `session_id`): the model sees
// the earlier turns with their tool calls and results, a reload shows the conversation again
// (GET /v1/sessions/{id}), the list beside it reopens a past one, "New conversation" starts
// another. A server without a run store has no sessions: the page then sends the text history
// itself, as before. A reasoning model's thinking shows above its answer, collapsed.
// Everything the server sends is put in the page as text; Markdown is built from DOM nodes.
"use strict";

import { api, stream } from "./api.js";
import { $, el, usageText } from "./dom.js";
import { markdownBox, renderMarkdown } from "./markdown.js";
import { Timeline } from "./timeline.js";

const SESSION_STORAGE = "skillyard.chatSession";
const FOLD = 120; // characters of a past tool call or result shown on its line

const chat = {
  sessions: true, // the server keeps sessions (false: it has no run store)
  id: null, // the open conversation's session id
  history: [], // without sessions: the text conversation the page sends; with them: messages to send once (Ask again)
  abort: null,
};

function newSessionId() {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return `chat-${Date.now().toString(36)}-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

// ─── models, conversations ──────────────────────────────────────────────────────────────

async function loadModels() {
  const select = $("#chat-model");
  try {
    const models = await api("GET", "/v1/models");
    select.replaceChildren(...models.models.map((name) => el("option", { value: name, text: name })));
    select.value = models.default;
  } catch { /* shown by loadTools */ }
}

/** The models, the list of past conversations, and the open conversation as the server keeps it. */
async function loadChat() {
  await loadModels();
  const open = localStorage.getItem(SESSION_STORAGE);
  const listed = await loadSessions();
  if (open && chat.sessions && listed.some((s) => s.id === open)) await openSession(open);
  else if (!chat.id) startConversation();
}

async function loadSessions() {
  let sessions = [];
  try {
    sessions = await api("GET", "/v1/sessions?limit=50");
    chat.sessions = true;
  } catch (error) {
    chat.sessions = !(error.status === 409);
  }
  const list = $("#chat-sessions");
  list.hidden = !chat.sessions;
  list.replaceChildren(el("li", { class: "muted", text: sessions.length ? "Past conversations" : "No past conversations yet" }),
    ...sessions.map((s) => {
      const item = el("li", { dataset: { sessionId: s.id } }, el("button", { type: "button", class: "link", text: sessionTitle(s) }));
      item.classList.toggle("active", s.id === chat.id);
      item.querySelector("button").addEventListener("click", () => openSession(s.id));
      return item;
    }));
  return sessions;
}

function sessionTitle(session) {
  const when = new Date(session.updated_at).toLocaleString();
  return `${when} · ${session.turns} turn${session.turns === 1 ? "" : "s"}`;
}

function startConversation() {
  chat.id = newSessionId();
  chat.history = [];
  localStorage.setItem(SESSION_STORAGE, chat.id);
  $("#chat-messages").replaceChildren();
  $("#chat-messages").dataset.sessionId = chat.id;
  for (const item of document.querySelectorAll("#chat-sessions li[data-session-id]")) item.classList.remove("active");
}

async function openSession(id) {
  let session;
  try {
    session = await api("GET", `/v1/sessions/${encodeURIComponent(id)}`);
  } catch {
    startConversation();
    return;
  }
  chat.id = id;
  chat.history = [];
  localStorage.setItem(SESSION_STORAGE, id);
  $("#chat-messages").replaceChildren(...pastMessages(session.messages || []));
  $("#chat-messages").dataset.sessionId = id;
  for (const item of document.querySelectorAll("#chat-sessions li[data-session-id]")) item.classList.toggle("active", item.dataset.sessionId === id);
}

/** A stored conversation as the page shows it: user and assistant text whole, each tool call and result on one line. */
function pastMessages(messages) {
  const nodes = [];
  for (const m of messages) {
    const text = typeof m.content === "string" ? m.content : "";
    if (m.role === "user") nodes.push(el("div", { class: "msg-user", text }));
    else if (m.role === "tool") nodes.push(el("div", { class: "past-tool muted", text: `← ${m.name || m.tool_call_id}: ${fold(text)}` }));
    else if (m.role === "assistant") {
      for (const call of m.tool_calls || []) nodes.push(el("div", { class: "past-tool muted", text: `→ ${call.function.name}(${fold(call.function.arguments || "")})` }));
      if (text.trim()) nodes.push(el("div", { class: "msg-assistant" }, el("div", { class: "avatar", text: "AI" }), el("div", { class: "assistant-card" }, markdownBox(text, "md assistant-text"))));
    }
  }
  return nodes;
}

function fold(text) {
  const line = text.split(/\s+/).join(" ").trim();
  return line.length <= FOLD ? line : `${line.slice(0, FOLD - 1)}…`;
}

// ─── one turn ───────────────────────────────────────────────────────────────────────────

function assistantPanel() {
  const card = el("div", { class: "assistant-card" });
  const node = el("div", { class: "msg-assistant" }, el("div", { class: "avatar", text: "AI" }), card);
  $("#chat-messages").append(node);
  return { node, card, parts: [], calls: new Map(), loading: null };
}

function textPart(panel) {
  const last = panel.parts[panel.parts.length - 1];
  if (last && last.type === "text") return last;
  const part = { type: "text", text: "", node: el("div", { class: "md assistant-text" }) };
  panel.parts.push(part);
  panel.card.insertBefore(part.node, panel.loading);
  return part;
}

/** The reasoning part: consecutive reasoning deltas merge into one, collapsed, "Thinking…" until it is done. */
function reasoningPart(panel) {
  const last = panel.parts[panel.parts.length - 1];
  if (last && last.type === "reasoning" && !last.done) return last;
  const summary = el("summary", { text: "Thinking…" });
  const body = el("div", { class: "reasoning-text" });
  const part = { type: "reasoning", text: "", done: false, summary, body, node: el("details", { class: "part-reasoning", dataset: { state: "thinking" } }, summary, body) };
  panel.parts.push(part);
  panel.card.insertBefore(part.node, panel.loading);
  return part;
}

function endReasoning(panel, d) {
  const part = reasoningPart(panel);
  part.done = true;
  part.node.dataset.state = "done";
  part.summary.textContent = `Thought for ${((d.duration_ms || 0) / 1000).toFixed(1)} s`;
}

/** Sets a text part's Markdown; rendered at most once a frame (an answer may stream in thousands of pieces). */
function setText(part, text) {
  part.text = text;
  if (part.frame) return;
  part.frame = requestAnimationFrame(() => renderText(part));
}

function renderText(part) {
  if (part.frame) cancelAnimationFrame(part.frame);
  part.frame = null;
  part.node.replaceChildren(renderMarkdown(part.text));
}

function toolPart(panel, ev, d) {
  const timeline = el("div", { class: "timeline" });
  const part = { type: "tool-call", node: el("div", { class: "part-tool", dataset: { toolCallId: ev.tool_call_id, state: "call" } }) };
  part.timeline = new Timeline(timeline);
  part.note = el("span", { class: "muted", text: " — calling" });
  part.node.append(el("div", {}, el("span", { class: "status", text: "tool" }), " ", el("strong", { text: d.tool }), part.note), timeline);
  part.timeline.add(ev);
  panel.parts.push(part);
  panel.calls.set(ev.tool_call_id, part);
  panel.card.insertBefore(part.node, panel.loading);
}

function onChatEvent(panel, ev) {
  const d = ev.data || {};
  if (ev.type === "model_text_delta") {
    const part = textPart(panel);
    setText(part, part.text + (d.text || ""));
  } else if (ev.type === "model_reasoning_delta") {
    const part = reasoningPart(panel);
    part.text += d.text || "";
    part.body.textContent = part.text;
  } else if (ev.type === "model_reasoning_done") endReasoning(panel, d);
  else if (ev.type === "tool_call_start") toolPart(panel, ev, d);
  else if (ev.tool_call_id && panel.calls.has(ev.tool_call_id)) {
    const part = panel.calls.get(ev.tool_call_id);
    part.timeline.add(ev);
    if (ev.type === "tool_call_result" || ev.type === "tool_call_error") {
      part.node.dataset.state = ev.type === "tool_call_result" ? "result" : "error";
      part.note.textContent = ev.type === "tool_call_result" ? " — done" : ` — failed (${(d.error || {}).code})`;
    }
  } else if (ev.type === "final_answer_delta") setText(textPart(panel), d.text || "");
  else if (ev.type === "agent_error") panel.card.insertBefore(el("div", { class: "err-text", text: d.message || "the agent failed" }), panel.loading);
  else if (ev.type === "agent_done") panel.done = d;
}

function finishPanel(panel) {
  for (const part of panel.parts) if (part.frame) renderText(part);
  const hasText = panel.parts.some((p) => p.type === "text" && p.text.trim());
  const hasCall = panel.parts.some((p) => p.type === "tool-call");
  const done = panel.done || {};
  if (hasText && !chat.sessions) chat.history.push({ role: "assistant", content: done.answer || panel.parts.filter((p) => p.type === "text").map((p) => p.text).join("\n") });
  else if (!hasText && hasCall) panel.card.append(el("div", { class: "muted", text: `(The tool-call limit was reached or the run stopped: ${done.stop_reason || "no answer"}; no final answer.)` }));
  else if (!hasText && !panel.card.querySelector(".err-text")) panel.card.append(el("div", { class: "err-text", text: "The model returned nothing." }));
  if (done.usage) {
    const usage = panel.parts.filter((p) => p.timeline).reduce((sum, p) => ({ input_tokens: sum.input_tokens + p.timeline.totals.input_tokens, output_tokens: sum.output_tokens + p.timeline.totals.output_tokens }), { ...done.usage });
    panel.card.append(el("div", { class: "usage chat-usage", dataset: { inputTokens: usage.input_tokens, outputTokens: usage.output_tokens } },
      `${done.steps} model call(s) · ${usageText(usage)}${usage.input_tokens !== done.usage.input_tokens ? " (with the tools' own model calls)" : ""}`));
  }
  panel.node.dataset.stopReason = done.stop_reason || "none";
}

/** The request's body: with sessions only the new message (and, once, a conversation put back by Ask again). */
function turnBody(text) {
  const message = { role: "user", content: text };
  const body = { enable_tools: $("#chat-tools").checked };
  if (chat.sessions) {
    body.session_id = chat.id;
    body.messages = [...chat.history, message];
    chat.history = [];
  } else {
    chat.history.push(message);
    body.messages = chat.history;
  }
  if ($("#chat-model").value) body.model = $("#chat-model").value;
  return body;
}

async function sendChat(event) {
  event.preventDefault();
  const text = $("#chat-text").value.trim();
  if (!text || chat.abort) return;
  if (!chat.id) startConversation();
  $("#chat-text").value = "";
  $("#chat-messages").append(el("div", { class: "msg-user", text }));
  const panel = assistantPanel();
  panel.loading = el("div", { class: "dots" }, el("span"), el("span"), el("span"));
  panel.card.append(panel.loading);
  const controller = new AbortController();
  chat.abort = controller;
  $("#chat-send").disabled = true;
  $("#chat-stop").hidden = false;
  try {
    await stream("POST", "/v1/agent", turnBody(text), (ev) => onChatEvent(panel, ev), controller.signal);
  } catch (error) {
    panel.card.append(el("div", { class: "err-text", text: error.name === "AbortError" ? "Stopped." : error.message }));
  } finally {
    panel.loading.remove();
    finishPanel(panel);
    chat.abort = null;
    $("#chat-send").disabled = false;
    $("#chat-stop").hidden = true;
    if (chat.sessions) loadSessions();
  }
}

/** Puts a past conversation back in a new conversation: earlier messages shown (and sent with the
 * next turn), the last user message in the box. */
function loadConversation(messages, model) {
  const history = (Array.isArray(messages) ? messages : []).filter((m) => m && typeof m.content === "string" && (m.role === "user" || m.role === "assistant"));
  const last = history.length && history[history.length - 1].role === "user" ? history.pop() : null;
  startConversation();
  chat.history = history.map((m) => ({ role: m.role, content: m.content }));
  $("#chat-messages").replaceChildren(...pastMessages(chat.history));
  $("#chat-text").value = last ? last.content : "";
  if (model && [...$("#chat-model").options].some((o) => o.value === model)) $("#chat-model").value = model;
}

function wireChat() {
  $("#chat-form").addEventListener("submit", sendChat);
  $("#chat-text").addEventListener("keydown", (event) => { if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) sendChat(event); });
  $("#chat-stop").addEventListener("click", () => chat.abort && chat.abort.abort());
  $("#chat-clear").addEventListener("click", () => { startConversation(); loadSessions(); });
}

export { loadChat, loadConversation, loadModels, wireChat };

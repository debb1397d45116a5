// Broken tools (GET /v1/tools/broken): a tool whose configuration has problems is listed,
// marked, with each problem's place and fix; and the admin's "Reload project" (POST /v1/admin/reload).
"use strict";

import { api } from "./api.js";
import { $, el } from "./dom.js";

const PROBLEM = /^(\S+?:\d+:\d+|[^\s:]+): ([\s\S]*?)(?: — ([\s\S]*))?$/;

/** "file:line:col: message — fix" → {where, message, fix} (text that does not parse is the message). */
export function parseProblem(text) {
  const match = PROBLEM.exec(text);
  return match ? { where: match[1], message: match[2], fix: match[3] || "" } : { where: "", message: text, fix: "" };
}

export function problemItem(text) {
  const { where, message, fix } = parseProblem(text);
  return el("li", { class: "problem" },
    where ? el("code", { class: "where", text: where }) : null,
    el("span", { class: "message", text: where ? ` ${message}` : message }),
    fix ? el("div", { class: "fix", text: `fix: ${fix}` }) : null);
}

/** The broken tools the caller may see, by name ({serving, problems}); {} when the server cannot say. */
export async function loadBroken() {
  try {
    const rows = await api("GET", "/v1/tools/broken");
    return Object.fromEntries(rows.map((row) => [row.name, row]));
  } catch {
    return {};
  }
}

/** Tool rows with the broken ones marked; a broken tool that does not run is added without a schema. */
export function markBroken(rows, broken) {
  const out = rows.map((row) => (broken[row.name] ? { ...row, broken: true, serving: true, problems: broken[row.name].problems } : row));
  for (const [name, entry] of Object.entries(broken)) {
    if (!rows.some((row) => row.name === name)) out.push({ name, description: "", broken: true, serving: entry.serving, problems: entry.problems, enabled: true });
  }
  return out;
}

/** Shows or hides the tool's problems; a broken tool that cannot run gets no form. */
export function showBrokenBox(tool) {
  $("#tool-broken").hidden = !tool.broken;
  $("#tool-runner").hidden = !!tool.broken && !tool.serving;
  if (!tool.broken) return;
  $("#tool-broken-note").textContent = tool.serving
    ? "The project files now have problems in this tool: it still runs its last good version until they are fixed and the project is reloaded."
    : "This tool cannot run: its configuration has problems (a call answers config_error). Fix them and reload the project.";
  $("#tool-problems").replaceChildren(...tool.problems.map(problemItem));
}

/** Calls POST /v1/admin/reload and says what came of it; returns whether the project changed. */
export async function reloadProject() {
  const box = $("#reload-result");
  const button = $("#reload-project");
  button.disabled = true;
  box.hidden = false;
  box.className = "reload-result";
  box.replaceChildren(el("span", { class: "muted", text: "reloading…" }));
  try {
    const outcome = await api("POST", "/v1/admin/reload");
    const broken = Object.entries(outcome.broken_tools || {});
    box.dataset.outcome = broken.length ? "degraded" : "ok";
    box.replaceChildren(el("div", { text: `Reloaded: ${outcome.summary}` }),
      broken.length ? el("div", { class: "error", text: `Broken now: ${broken.map(([name, problems]) => `${name} (${problems.length} problem${problems.length === 1 ? "" : "s"})`).join(", ")}` })
        : el("div", { class: "st-ok", text: "Every tool links." }));
    return true;
  } catch (error) {
    box.dataset.outcome = "failed";
    box.className = "reload-result failed";
    const issues = (error.body && error.body.error && error.body.error.details && error.body.error.details.issues) || [];
    box.replaceChildren(el("div", { class: "error", text: `Reload failed: ${error.message}` }), el("ul", { class: "problems" }, issues.map(problemItem)));
    return false;
  } finally {
    button.disabled = false;
  }
}

// Small DOM helpers shared by the page's modules. Every value from the server goes in as
// text (textContent / text nodes); Markdown goes through markdown.js, which does the same.
"use strict";

import { markdownBox } from "./markdown.js";

export const $ = (sel, root = document) => root.querySelector(sel);

export function el(tag, attrs = {}, ...children) {
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

/** A name such as `fetchPageSummary` or `fetch_page.v2` as text that may wrap only between its words (<wbr>). */
export function wordBreaks(name) {
  const parts = String(name).split(/(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[_\-./])/);
  const out = document.createDocumentFragment();
  parts.forEach((part, i) => { if (i) out.append(document.createElement("wbr")); out.append(part); });
  return out;
}

export function pretty(value) {
  if (typeof value === "string") return value;
  try { return JSON.stringify(value, null, 2); } catch { return String(value); }
}

const MAX_CHARS = 20000;

function clip(text) {
  return text.length > MAX_CHARS ? `${text.slice(0, MAX_CHARS)}\n…(${(text.length - MAX_CHARS).toLocaleString()} more characters not shown)` : text;
}

const FIELDS_DEPTH = 3; // levels of an object shown as fields before the rest shows as JSON
const FIELDS_MOST = 50; // an object or array with more entries shows as JSON

function composite(value) {
  return value !== null && typeof value === "object" && Object.keys(value).length <= FIELDS_MOST;
}

/** Whether `value` holds a multi-line string (Markdown, as a rule) within the levels shown as fields. */
function holdsText(value, depth = 0) {
  if (typeof value === "string") return value.includes("\n");
  return depth < FIELDS_DEPTH && composite(value) && Object.values(value).some((v) => holdsText(v, depth + 1));
}

/** An object's entries as fields: multi-line strings rendered as Markdown, short ones as text, the rest as JSON. */
function fieldsView(value, depth) {
  const list = el("dl", { class: "value-fields" });
  for (const [key, item] of Object.entries(value)) {
    let shown;
    if (typeof item === "string") shown = item.includes("\n") ? markdownBox(clip(item)) : el("span", { class: "plain", text: clip(item) });
    else if (depth + 1 < FIELDS_DEPTH && composite(item) && holdsText(item)) shown = fieldsView(item, depth + 1);
    else shown = el("pre", { class: "code", text: clip(pretty(item)) });
    list.append(el("dt", { text: key }), el("dd", { dataset: { key } }, shown));
  }
  return list;
}

/**
 * A value as people read it: a string rendered as Markdown (raw text one click away); an object
 * or array holding Markdown strings as fields with those strings rendered (its JSON one click
 * away); anything else as JSON.
 */
export function valueView(value) {
  if (typeof value !== "string") {
    const json = el("pre", { class: "code", text: clip(pretty(value)) });
    if (!composite(value) || !holdsText(value)) return json;
    return el("div", { class: "value-json" }, fieldsView(value, 0), el("details", { class: "raw-json" }, el("summary", { text: "raw JSON" }), json));
  }
  const box = el("div", { class: "value-text" }, markdownBox(clip(value)));
  box.append(el("details", { class: "raw" }, el("summary", { text: "raw text" }), el("pre", { class: "code", text: clip(value) })));
  return box;
}

/** A collapsible labelled value; strings render as Markdown. */
export function expandable(label, value, open = false) {
  return el("details", { open, class: "value" }, el("summary", { text: label }), valueView(value));
}

export function ms(value) {
  if (value === null || value === undefined) return "";
  return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`;
}

/** "1,234 in / 56 out tokens · $0.0012" from a usage object (cost only when the usage carries one). */
export function usageText(usage) {
  if (!usage) return "";
  const parts = [`${Number(usage.input_tokens || 0).toLocaleString("en")} in / ${Number(usage.output_tokens || 0).toLocaleString("en")} out tokens`];
  const cost = usageCost(usage);
  if (cost !== null) parts.push(`$${cost < 0.01 ? cost.toFixed(4) : cost.toFixed(2)}`);
  return parts.join(" · ");
}

export function usageCost(usage) {
  const cost = usage && (usage.cost_usd ?? usage.cost);
  return typeof cost === "number" && Number.isFinite(cost) ? cost : null;
}

export function notice(message) {
  const box = $("#notice");
  box.textContent = message || "";
  box.hidden = !message;
}

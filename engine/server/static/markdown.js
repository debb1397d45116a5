// Markdown → DOM, a safe subset: headings, paragraphs, lists, block quotes, fenced code,
// **strong**, *emphasis*, `code`, [links](https://…) and bare http(s) URLs.
// Text from a model or a tool is untrusted: every piece of it reaches the page through
// createTextNode / textContent, never innerHTML, so `<script>` or `onerror=` stay text.
// A link is made only for an http: or https: URL; anything else stays as written.
"use strict";

const INLINE = new RegExp([
  "`([^`\\n]+)`",                                   // 1: code
  "\\[([^\\]\\n]+)\\]\\(([^)\\s]+)\\)",             // 2, 3: [text](url)
  "\\*\\*(?=\\S)([^*\\n]*?\\S)\\*\\*",              // 4: **strong**
  "__(?=\\S)([^_\\n]*?\\S)__",                      // 5: __strong__
  "\\*(?=[^*\\s])([^*\\n]*?[^*\\s])?\\*",           // 6: *em*
  "(?<![\\w])_(?=[^_\\s])([^_\\n]*?[^_\\s])?_(?![\\w])", // 7: _em_
  "(https?://[^\\s<>()\\[\\]\"']+[^\\s<>()\\[\\]\"'.,;:!?])", // 8: a bare URL
].join("|"), "g");

/** An http(s) URL as a string, or null for anything else (javascript:, data:, relative…). */
export function safeHref(text) {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch { return null; }
}

function link(text, href, parent) {
  const a = document.createElement("a");
  a.href = href;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  if (text === null) a.textContent = href; else inline(text, a);
  parent.append(a);
}

function wrap(tag, text, parent) {
  const node = document.createElement(tag);
  inline(text, node);
  parent.append(node);
}

/** Appends `text`'s inline Markdown to `parent` as DOM nodes. */
export function inline(text, parent) {
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    last = m.index + m[0].length;
    if (m[1] !== undefined) {
      const code = document.createElement("code");
      code.textContent = m[1];
      parent.append(code);
    } else if (m[2] !== undefined) {
      const href = safeHref(m[3]);
      if (href) link(m[2], href, parent); else parent.append(document.createTextNode(m[0]));
    } else if (m[4] !== undefined || m[5] !== undefined) wrap("strong", m[4] ?? m[5], parent);
    else if (m[8] !== undefined) {
      const href = safeHref(m[8]);
      if (href) link(null, href, parent); else parent.append(document.createTextNode(m[0]));
    } else if (m[6] !== undefined || m[7] !== undefined) wrap("em", m[6] ?? m[7], parent);
    else parent.append(document.createTextNode(m[0])); // `**` or `_` alone
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

const BLOCK = {
  fence: /^\s{0,3}(```|~~~)\s*([\w+-]*)\s*$/,
  heading: /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/,
  item: /^( {0,3})([-*+]|\d{1,9}[.)])(?:( +)(.*))?$/,
  quote: /^\s{0,3}>\s?(.*)$/,
  rule: /^\s{0,3}([-*_])(\s*\1){2,}\s*$/,
};
const MAX_DEPTH = 16; // lists and quotes nested deeper read as text (a hostile text cannot exhaust the stack)

/** A list item's marker: bullet or ordered, its number, where the marker and the item's text start. */
function marker(line) {
  const m = line.match(BLOCK.item);
  if (!m) return null;
  const spaces = m[3] ? m[3].length : 1;
  return { ordered: !/[-*+]/.test(m[2]), number: parseInt(m[2], 10), indent: m[1].length,
           column: m[1].length + m[2].length + (spaces > 4 ? 1 : spaces), text: m[3] ? (spaces > 4 ? m[3].slice(1) : "") + (m[4] || "") : "" };
}

const indentOf = (line) => line.length - line.trimStart().length;

/** Builds the blocks of `text` (a string) and returns them as a DocumentFragment. */
export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n").map((line) => line.replace(/^\t+/, (tabs) => "    ".repeat(tabs.length)));
  blocks(lines, out, 0);
  return out;
}

/** Appends the blocks of `lines` to `parent`; a list item's or a quote's lines come here again, their indent or `>` taken off. */
function blocks(lines, parent, depth) {
  let paragraph = null; // the <p> being filled
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(BLOCK.fence);
    const item = depth < MAX_DEPTH ? marker(line) : null;
    const quoted = depth < MAX_DEPTH ? line.match(BLOCK.quote) : null;
    const heading = line.match(BLOCK.heading);
    if (!line.trim()) { paragraph = null; continue; } // a blank line ends a paragraph
    if (fence || item || quoted || heading) paragraph = null;
    if (fence) i = codeBlock(lines, i, fence, parent);
    else if (BLOCK.rule.test(line) && !(item && item.text.trim())) { paragraph = null; parent.append(document.createElement("hr")); }
    else if (item) i = list(lines, i, parent, depth);
    else if (heading) wrap(`h${Math.min(6, heading[1].length + 2)}`, heading[2], parent); // h1 of a result sits below the page's own
    else if (quoted) {
      const inner = [];
      for (; i < lines.length && BLOCK.quote.test(lines[i]); i++) inner.push(lines[i].match(BLOCK.quote)[1]);
      i -= 1;
      const quote = document.createElement("blockquote");
      blocks(inner, quote, depth + 1);
      parent.append(quote);
    } else {
      if (!paragraph) { paragraph = document.createElement("p"); parent.append(paragraph); }
      else paragraph.append(document.createElement("br"));
      inline(line.trim(), paragraph);
    }
  }
}

/** A fenced code block from line `i`; returns the index of its closing fence (or the last line). */
function codeBlock(lines, i, fence, parent) {
  const code = [];
  for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) code.push(lines[i]);
  const pre = document.createElement("pre");
  const codeNode = document.createElement("code");
  if (fence[2]) codeNode.dataset.lang = fence[2];
  codeNode.textContent = code.join("\n");
  pre.append(codeNode);
  parent.append(pre);
  return i;
}

/**
 * The list starting at line `i`: its items while they are of its kind (blank lines between
 * items keep it going). An item holds the lines indented past its marker, taken back to its
 * text's column, as blocks of their own: nested lists, headings, code, paragraphs. Returns the
 * index of the list's last line.
 */
function list(lines, i, parent, depth) {
  const first = marker(lines[i]);
  const node = document.createElement(first.ordered ? "ol" : "ul");
  if (first.ordered && first.number !== 1) node.start = first.number;
  parent.append(node);
  let last = i;
  for (let m = first; m && m.ordered === first.ordered; m = i < lines.length ? marker(lines[i]) : null) {
    const body = [m.text];
    for (i++; i < lines.length && (!lines[i].trim() || indentOf(lines[i]) > m.indent); i++) {
      body.push(lines[i].trim() ? lines[i].slice(Math.min(indentOf(lines[i]), m.column)) : "");
    }
    while (body.length > 1 && !body[body.length - 1]) body.pop();
    last = i - 1;
    const li = document.createElement("li");
    blocks(body, li, depth + 1);
    if (!body.includes("")) for (const p of [...li.children]) if (p.tagName === "P") p.replaceWith(...p.childNodes); // a tight item: its text, no <p>
    node.append(li);
  }
  return last;
}

/** A <div class="md"> holding `text` rendered. */
export function markdownBox(text, className = "md") {
  const box = document.createElement("div");
  box.className = className;
  box.append(renderMarkdown(text));
  return box;
}

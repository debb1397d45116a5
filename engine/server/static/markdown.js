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
  bullet: /^\s*[-*+]\s+(.*)$/,
  numbered: /^\s*(\d{1,9})[.)]\s+(.*)$/,
  quote: /^\s{0,3}>\s?(.*)$/,
  rule: /^\s{0,3}([-*_])(\s*\1){2,}\s*$/,
};

/** Builds the blocks of `text` (a string) and returns them as a DocumentFragment. */
export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let paragraph = null; // the <p> being filled
  let list = null;      // the <ul>/<ol> being filled
  let quote = null;
  const closeParagraph = () => { paragraph = null; };
  const closeAll = () => { paragraph = null; list = null; quote = null; };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(BLOCK.fence);
    if (fence) {
      closeAll();
      const code = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) code.push(lines[i]);
      const pre = document.createElement("pre");
      const codeNode = document.createElement("code");
      if (fence[2]) codeNode.dataset.lang = fence[2];
      codeNode.textContent = code.join("\n");
      pre.append(codeNode);
      out.append(pre);
      continue;
    }
    if (!line.trim()) { // a blank line ends a paragraph; a list may go on after it (a loose list)
      paragraph = null;
      quote = null;
      if (list && !nextIsItem(lines, i, list.tagName)) list = null;
      continue;
    }
    const heading = line.match(BLOCK.heading);
    const bullet = line.match(BLOCK.bullet);
    const numbered = line.match(BLOCK.numbered);
    const quoted = line.match(BLOCK.quote);
    if (BLOCK.rule.test(line) && !bullet) { closeAll(); out.append(document.createElement("hr")); }
    else if (heading) {
      closeAll();
      wrap(`h${Math.min(6, heading[1].length + 2)}`, heading[2], out); // h1 of a result sits below the page's own
    } else if (bullet || numbered) {
      closeParagraph();
      quote = null;
      const tag = bullet ? "UL" : "OL";
      if (!list || list.tagName !== tag) {
        list = document.createElement(tag);
        if (numbered && numbered[1] !== "1") list.start = Number(numbered[1]);
        out.append(list);
      }
      wrap("li", bullet ? bullet[1] : numbered[2], list);
    } else if (quoted) {
      paragraph = null;
      list = null;
      if (!quote) { quote = document.createElement("blockquote"); out.append(quote); }
      else quote.append(document.createElement("br"));
      inline(quoted[1], quote);
    } else if (list && /^\s{2,}\S/.test(line)) { // a continuation line of the last item
      const item = list.lastElementChild;
      item.append(document.createElement("br"));
      inline(line.trim(), item);
    } else {
      list = null;
      quote = null;
      if (!paragraph) { paragraph = document.createElement("p"); out.append(paragraph); }
      else paragraph.append(document.createElement("br"));
      inline(line, paragraph);
    }
  }
  return out;
}

function nextIsItem(lines, i, tag) {
  for (let j = i + 1; j < lines.length; j++) {
    if (!lines[j].trim()) continue;
    return tag === "UL" ? BLOCK.bullet.test(lines[j]) : BLOCK.numbered.test(lines[j]);
  }
  return false;
}

/** A <div class="md"> holding `text` rendered. */
export function markdownBox(text, className = "md") {
  const box = document.createElement("div");
  box.className = className;
  box.append(renderMarkdown(text));
  return box;
}

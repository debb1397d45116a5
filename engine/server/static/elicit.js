// An MCP server's question during a tool call (an `input_required` event): its message, a form
// generated from its requested schema (forms.js; the schema's defaults filled in), Send and
// Decline. The answer goes to the run's approvals endpoint with the values; a value the server
// side refuses (422) is shown at its field. The server's text is shown as text, never as HTML.
"use strict";

import { api } from "./api.js";
import { el } from "./dom.js";
import { buildForm, FormError } from "./forms.js";

/** Gives the form's ids a per-question prefix: the tool's own form on the page uses the same names. */
function scopeIds(container, prefix) {
  for (const node of container.querySelectorAll("[id]")) node.id = `${prefix}-${node.id}`;
  for (const node of container.querySelectorAll("label[for]")) node.htmlFor = `${prefix}-${node.htmlFor}`;
  for (const attr of ["aria-describedby", "aria-errormessage"]) {
    for (const node of container.querySelectorAll(`[${attr}]`)) node.setAttribute(attr, `${prefix}-${node.getAttribute(attr)}`);
  }
}

/** The box for one question: `ev` is the input_required event, `d` its data {server, message, requested_schema}. */
export function elicitBox(ev, d) {
  const runId = ev.run_id;
  const callId = ev.tool_call_id;
  const fields = el("div", { class: "elicit-fields", style: "flex-basis: 100%" }); // its own line in the approval box
  const form = buildForm(fields, d.requested_schema || {});
  scopeIds(fields, `elicit-${callId}`);
  const status = el("div", { class: "err-text elicit-error", hidden: true });
  const box = el("div", { class: "approval elicit", dataset: { toolCallId: callId } },
    el("div", { class: "elicit-question", style: "flex-basis: 100%" }, el("strong", { text: `${d.server} asks: ` }), el("span", { text: d.message || "" })),
    fields, status);
  const send = async (approve) => {
    status.hidden = true;
    let body = { approve };
    if (approve) {
      try { body = { approve, values: form.read() }; } catch (error) { if (error instanceof FormError) return; throw error; }
    }
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    try {
      await api("POST", `/v1/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(callId)}`, body);
      box.replaceChildren(approve ? "Answer sent." : "Declined.");
    } catch (error) {
      const details = (error.body && error.body.error && error.body.error.details) || {};
      const field = details.field && form.field(details.field);
      if (field) field.fail(error.message);
      status.textContent = error.message;
      status.hidden = false;
      for (const b of box.querySelectorAll("button")) b.disabled = false;
    }
  };
  box.append(el("button", { type: "button", class: "primary approve", text: "Send", onclick: () => send(true) }),
             el("button", { type: "button", class: "deny", text: "Decline", onclick: () => send(false) }));
  return box;
}

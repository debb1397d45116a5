// The Batches view: the batches `skillyard batch` recorded (GET /v1/batches), one batch's cases
// (GET /v1/batches/{id}); a case opens its run's timeline in the Runs view (#runs/<run id>).
"use strict";

import { api } from "./api.js";
import { $, el, ms } from "./dom.js";

function percent(rate) {
  return rate === null || rate === undefined ? "–" : `${Math.round(rate * 100)} %`;
}

function batchRow(batch) {
  const failed = batch.ran - batch.passed; // a call that failed as its case expected passed: not counted here
  const row = el("tr", { dataset: { batchId: batch.id, status: batch.status }, tabindex: "0" },
    el("td", { text: new Date(batch.started_at).toLocaleString() }),
    el("td", { text: batch.tool }),
    el("td", { class: "n", text: batch.ran === batch.total ? String(batch.total) : `${batch.ran} of ${batch.total}` }),
    el("td", { class: "n pass-rate", text: `${batch.passed} · ${percent(batch.pass_rate)}`, title: "cases whose expectations all held" }),
    el("td", { class: `n failed ${failed ? "st-error" : ""}`, text: String(failed), title: "cases that did not pass: an unexpected error, or an expectation that did not hold" }),
    el("td", { class: `col-kind st-${batch.status === "done" ? "ok" : batch.status}`, text: batch.status }));
  const open = () => { location.hash = `#batches/${encodeURIComponent(batch.id)}`; };
  row.addEventListener("click", open);
  row.addEventListener("keydown", (event) => { if (event.key === "Enter") open(); });
  return row;
}

/** Lists the recent batches (a caller sees its own; an admin every batch). */
export async function loadBatches() {
  const body = $("#batches-body");
  try {
    const batches = await api("GET", "/v1/batches?limit=100");
    body.replaceChildren(...batches.map(batchRow));
    if (!batches.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 6, class: "muted", text: "No batches yet: run `skillyard batch TOOL --data FILE`." })));
    $("#batches-count").textContent = batches.length ? `${batches.length} batch${batches.length === 1 ? "" : "es"}` : "";
  } catch (error) {
    body.replaceChildren(el("tr", {}, el("td", { colspan: 6, class: "error", text: error.message })));
    $("#batches-count").textContent = "";
  }
}

/** A case's expectations: every verdict when the batch recorded them, else whether all held. */
function expectations(item) {
  if (Array.isArray(item.expect) && item.expect.length) {
    return el("ul", { class: "verdicts" }, item.expect.map((v) => el("li", { class: v.ok ? "st-ok" : "st-error" },
      `${v.ok ? "✓" : "✗"} ${v.check}${v.path ? ` ${v.path}` : ""}: ${v.message || ""}`)));
  }
  return el("span", { class: item.passed ? "st-ok" : "st-error", text: item.passed ? "all held" : "not all held" });
}

/** A case's call: ok, failed as its case expected (it passed), or failed. */
function callResult(item) {
  if (item.ok) return el("td", { class: "st-ok", text: "ok" });
  return item.passed ? el("td", { class: "st-ok", text: "failed, as expected" }) : el("td", { class: "st-error", text: "failed" });
}

function caseRow(item) {
  const row = el("tr", { dataset: { caseId: item.id, runId: item.run_id, ok: String(item.ok) }, tabindex: "0", title: `run ${item.run_id}` },
    el("td", { class: "code", text: item.id }),
    callResult(item),
    el("td", { class: "code error-code", text: item.error_code || "" }),
    el("td", { class: "expect" }, expectations(item)),
    el("td", { class: "col-dur", text: ms(item.duration_ms) }));
  const open = () => { location.hash = `#runs/${encodeURIComponent(item.run_id)}`; };
  row.addEventListener("click", open);
  row.addEventListener("keydown", (event) => { if (event.key === "Enter") open(); });
  return row;
}

/** Shows one batch and its cases above the list. */
export async function showBatch(batchId) {
  $("#batch-detail").hidden = false;
  $("#batch-title").textContent = batchId;
  $("#batch-meta").textContent = "";
  $("#batch-cases").replaceChildren();
  try {
    const batch = await api("GET", `/v1/batches/${encodeURIComponent(batchId)}`);
    const took = batch.finished_at ? ` · took ${ms(batch.finished_at - batch.started_at)}` : "";
    $("#batch-meta").textContent = `${batch.tool} · ${batch.status} · ${batch.ran} of ${batch.total} cases ran, ${batch.ok} ok, `
      + `${batch.passed} passed (${percent(batch.pass_rate)})${batch.data_file ? ` · data ${batch.data_file}` : ""}${took}`;
    $("#batch-cases").replaceChildren(...batch.cases.map(caseRow));
    if (!batch.cases.length) $("#batch-cases").replaceChildren(el("tr", {}, el("td", { colspan: 5, class: "muted", text: "No case has finished yet." })));
  } catch (error) {
    $("#batch-meta").textContent = error.message;
  }
}

export function hideBatch() {
  $("#batch-detail").hidden = true;
}

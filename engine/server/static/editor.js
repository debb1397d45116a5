// The tool editor (admins): "New tool" and "Edit" open a form for a whole tool — name, title,
// description, type, the type's own fields (from its config schema), parameters as a JSON
// Schema with a live preview of the form a caller will see, config as JSON, confirm, enabled.
// Save is POST (new) or PUT (edit) /v1/admin/tools; the server checks it as tools.yaml is and
// answers the problems by field (details.fields), shown at their field. "Test" calls the draft
// once (POST /v1/admin/tools/test) with the preview's values, nothing stored. Config values are
// shown and sent as they are: a `${env:…}` reference stays a reference, never resolved here.
"use strict";

import { api } from "./api.js";
import { $, el, valueView } from "./dom.js";
import { FormError, buildForm } from "./forms.js";

const ed = { tool: null, types: [], typeForm: null, preview: null, originalParameters: "", declaredParameters: false, hooks: null };
const FIELDS = ["name", "title", "description", "type", "order", "parameters", "config", "confirm", "enabled"];

/** `hooks.changed(name)`: after a save, delete or reset (the list reloads); `hooks.closed()`: the editor went away. */
export function setupEditor(hooks) {
  ed.hooks = hooks;
  $("#ed-form").addEventListener("submit", (event) => { event.preventDefault(); save(); });
  $("#ed-cancel").addEventListener("click", () => { closeEditor(); hooks.closed(); });
  $("#ed-test").addEventListener("click", testDraft);
  $("#ed-delete").addEventListener("click", removeTool);
  $("#ed-reset").addEventListener("click", resetTool);
  $("#ed-type").addEventListener("change", () => typeFields(currentConfig() || {}));
  $("#ed-parameters").addEventListener("input", previewParameters);
  $("#ed-config").addEventListener("input", configTyped);
  $("#ed-type-fields").addEventListener("input", typeFieldChanged);
  $("#ed-type-fields").addEventListener("change", typeFieldChanged);
}

export function closeEditor() {
  $("#tool-editor").hidden = true;
}

/** Opens the editor on `tool` (an admin view from GET /v1/admin/tools), or empty for a new tool. */
export async function openEditor(tool) {
  ed.tool = tool;
  try { ed.types = await api("GET", "/v1/admin/tool-types"); } catch { ed.types = []; }
  $("#tool-detail").hidden = true;
  $("#tool-empty").hidden = true;
  $("#tool-editor").hidden = false;
  $("#ed-heading").textContent = tool ? `Edit ${tool.name}` : "New tool";
  $("#ed-name").value = tool ? tool.name : "";
  $("#ed-name").disabled = Boolean(tool);
  $("#ed-title").value = (tool && tool.title) || "";
  const declared = (tool && tool.declared) || {};
  $("#ed-description").value = declared.description || (tool && tool.description) || "";
  $("#ed-order").value = tool ? String(tool.order || 0) : "0";
  $("#ed-confirm").checked = Boolean(tool && tool.confirm);
  $("#ed-enabled").checked = tool ? Boolean(tool.enabled) : true;
  typeChoices(tool);
  $("#ed-config").value = JSON.stringify((tool && tool.config) || {}, null, 2);
  // a type's own parameters (none declared) are shown, and sent only once edited
  ed.declaredParameters = Boolean(declared.parameters);
  ed.originalParameters = JSON.stringify(declared.parameters || (tool && tool.parameters) || { type: "object", properties: {} }, null, 2);
  $("#ed-parameters").value = ed.originalParameters;
  $("#ed-delete").hidden = !(tool && tool.source === "store");
  $("#ed-reset").hidden = !(tool && tool.source === "yaml" && Object.keys(tool.overrides || {}).length);
  $("#ed-times").textContent = tool && tool.created_at ? `created ${stamp(tool.created_at)} · changed ${stamp(tool.updated_at)}` : "";
  $("#ed-test-result").replaceChildren();
  clearErrors();
  typeFields((tool && tool.config) || {});
  previewParameters();
}

function stamp(msSinceEpoch) {
  return new Date(msSinceEpoch).toLocaleString();
}

/** The registered types an admin may create; a YAML tool keeps its own type (not changeable here). */
function typeChoices(tool) {
  const select = $("#ed-type");
  const names = ed.types.map((t) => t.name);
  if (tool && !names.includes(tool.type)) names.unshift(tool.type);
  select.replaceChildren(...names.map((name) => el("option", { value: name, text: name })));
  if (tool) select.value = tool.type;
  select.disabled = Boolean(tool && tool.source === "yaml");
}

/** The selected type's own fields, generated from its config schema, showing `config`'s values. */
function typeFields(config) {
  const type = ed.types.find((t) => t.name === $("#ed-type").value);
  const box = $("#ed-type-fields");
  if (!type) {
    ed.typeForm = null;
    box.replaceChildren(el("div", { class: "muted", text: "Fields of this type: edit its config as JSON below." }));
    return;
  }
  ed.typeForm = buildForm(box, type.config_schema || {}, "cfg");
  ed.typeForm.write(config);
}

/** A type field edited: its value goes into the config JSON (only the keys touched, so defaults stay defaults). */
function typeFieldChanged(event) {
  const name = event.target && event.target.name;
  const field = ed.typeForm && name ? ed.typeForm.field(name) : null;
  if (!field) return;
  const config = currentConfig();
  if (config === null) return;
  try {
    const value = field.read();
    if (value === undefined) delete config[name]; else config[name] = value;
  } catch (problem) {
    field.fail(problem.message);
    return;
  }
  $("#ed-config").value = JSON.stringify(config, null, 2);
  showError("config", "");
}

/** The config JSON edited: checked as it is typed, and written into the type's fields. */
function configTyped() {
  const config = currentConfig();
  if (config !== null && ed.typeForm) ed.typeForm.write(config);
}

/** The config as an object, or null (with the problem shown at the field). */
function currentConfig() {
  let value;
  try { value = JSON.parse($("#ed-config").value || "{}"); } catch (error) {
    showError("config", `not valid JSON: ${error.message}`);
    return null;
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    showError("config", "the config must be a JSON object");
    return null;
  }
  showError("config", "");
  return value;
}

/** Live: the parameters' JSON checked as it is typed, and the form a caller will see. */
function previewParameters() {
  const schema = currentParameters();
  const box = $("#ed-preview");
  if (schema === null) {
    ed.preview = null;
    box.replaceChildren(el("div", { class: "muted", text: "The preview waits for valid parameters." }));
    return;
  }
  ed.preview = buildForm(box, schema, "preview");
}

function currentParameters() {
  let schema;
  try { schema = JSON.parse($("#ed-parameters").value); } catch (error) {
    showError("parameters", `not valid JSON: ${error.message}`);
    return null;
  }
  const problem = !schema || typeof schema !== "object" || Array.isArray(schema) ? "the parameters must be a JSON Schema object"
    : schema.type !== "object" ? "the parameters must have \"type\": \"object\" (model APIs pass arguments as one object)"
    : schema.properties !== undefined && (typeof schema.properties !== "object" || Array.isArray(schema.properties)) ? "\"properties\" must be an object"
    : schema.required !== undefined && !Array.isArray(schema.required) ? "\"required\" must be a list of names" : "";
  showError("parameters", problem);
  return problem ? null : schema;
}

/** The draft as PUT takes it; `parameters` only when edited (else the type's own schema stays its own). */
function draft() {
  const config = currentConfig();
  const parameters = currentParameters();
  if (config === null || parameters === null) return null;
  const body = {
    description: $("#ed-description").value.trim() || undefined,
    title: $("#ed-title").value.trim() || undefined,
    order: $("#ed-order").value === "" ? undefined : Number($("#ed-order").value),
    type: $("#ed-type").value || undefined,
    config,
    confirm: $("#ed-confirm").checked,
    enabled: $("#ed-enabled").checked,
  };
  if ($("#ed-parameters").value !== ed.originalParameters || ed.declaredParameters) body.parameters = parameters;
  return body;
}

async function save() {
  clearErrors();
  const body = draft();
  if (!body) return;
  const name = ed.tool ? ed.tool.name : $("#ed-name").value.trim();
  $("#ed-status").textContent = "saving…";
  try {
    if (ed.tool) await api("PUT", `/v1/admin/tools/${encodeURIComponent(name)}`, body);
    else await api("POST", "/v1/admin/tools", { name, ...body, description: body.description || `${body.type} tool ${name}` });
    $("#ed-status").textContent = "";
    closeEditor();
    await ed.hooks.changed(name);
  } catch (error) {
    $("#ed-status").textContent = "";
    refused(error);
  }
}

async function testDraft() {
  clearErrors();
  const tool = draft();
  if (!tool || !ed.preview) return;
  let args;
  try { args = ed.preview.read(); } catch (error) {
    if (!(error instanceof FormError)) throw error;
    showError("", `sample arguments: ${error.message}`);
    return;
  }
  const name = ed.tool ? ed.tool.name : $("#ed-name").value.trim();
  $("#ed-status").textContent = "testing…";
  const out = $("#ed-test-result");
  out.replaceChildren();
  try {
    const result = await api("POST", "/v1/admin/tools/test", { name, tool, arguments: args });
    out.dataset.ok = String(result.ok);
    out.append(el("div", { class: result.ok ? "ok" : "error", text: result.ok ? "The draft ran." : `The draft failed: ${result.error.code}: ${result.error.message}` }),
      result.ok ? valueView(result.data) : null);
  } catch (error) {
    refused(error);
  } finally {
    $("#ed-status").textContent = "";
  }
}

async function removeTool() {
  if (!ed.tool || !window.confirm(`Delete the tool ${ed.tool.name}?`)) return;
  try {
    await api("DELETE", `/v1/admin/tools/${encodeURIComponent(ed.tool.name)}`);
    closeEditor();
    await ed.hooks.changed(null);
  } catch (error) { refused(error); }
}

async function resetTool() {
  if (!ed.tool) return;
  try {
    await api("DELETE", `/v1/admin/tools/${encodeURIComponent(ed.tool.name)}/override`);
    closeEditor();
    await ed.hooks.changed(ed.tool.name);
  } catch (error) { refused(error); }
}

/** A refusal: each problem at its field (`config.url` at the type's `url` field when there is one). */
function refused(error) {
  const fields = (error.body && error.body.error && error.body.error.details && error.body.error.details.fields) || null;
  if (!fields) { showError("", error.message); return; }
  for (const [path, problems] of Object.entries(fields)) {
    const [head, key] = path.split(".");
    const typeField = head === "config" && key && ed.typeForm ? ed.typeForm.field(key) : null;
    if (typeField) typeField.fail(problems.join("; "));
    else showError(FIELDS.includes(head) ? head : "", problems.join("; "));
  }
}

function showError(field, message) {
  const box = $(field ? `#ed-${field}-error` : "#ed-error");
  const input = field ? $(`#ed-${field}`) : null;
  box.textContent = message;
  box.hidden = !message;
  if (input) {
    if (message) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid");
  }
}

function clearErrors() {
  for (const field of ["", ...FIELDS]) showError(field, "");
}

// A form from a tool's JSON Schema: one labelled field per property, read back into the
// arguments object. Short strings (a format, a pattern, maxLength ≤ 200) get one line; an
// empty required field is an error in the form, shown before anything is sent. A past
// run's arguments can be written back into the form ("run again").
"use strict";

import { el } from "./dom.js";

const SHORT_STRING = 200; // maxLength up to this is a single-line input
const INPUT_TYPES = { uri: "url", url: "url", "uri-reference": "url", iri: "url", email: "email" };

export class FormError extends Error {
  constructor(problems) {
    super(problems.map((p) => p.message).join("; "));
    this.problems = problems;
  }
}

function typeOf(schema) {
  return Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
}

/** Whether a string property is short enough for a one-line input. */
export function isShortString(schema) {
  return Boolean(schema.format || schema.pattern || (typeof schema.maxLength === "number" && schema.maxLength <= SHORT_STRING));
}

function control(id, name, schema, type, required) {
  const hasDefault = schema.default !== undefined;
  if (Array.isArray(schema.enum)) {
    const input = el("select", { id, name, required });
    input.append(el("option", { value: "", text: required ? "— choose —" : "—" }));
    schema.enum.forEach((value, index) => input.append(el("option", { value: String(index), text: typeof value === "string" ? value : JSON.stringify(value) })));
    const index = (value) => schema.enum.findIndex((v) => JSON.stringify(v) === JSON.stringify(value));
    if (hasDefault && index(schema.default) >= 0) input.value = String(index(schema.default));
    return { input, kind: "enum", read: () => (input.value === "" ? undefined : schema.enum[Number(input.value)]),
             write: (v) => { const i = index(v); if (i < 0) return false; input.value = String(i); return true; } };
  }
  if (type === "boolean") {
    const input = el("input", { id, name, type: "checkbox" });
    input.checked = schema.default === true;
    return { input, kind: "boolean", read: () => input.checked,
             write: (v) => { if (typeof v !== "boolean") return false; input.checked = v; return true; } };
  }
  if (type === "integer" || type === "number") {
    const input = el("input", { id, name, type: "number", step: type === "integer" ? "1" : "any", min: schema.minimum, max: schema.maximum, required, inputmode: type === "integer" ? "numeric" : "decimal" });
    if (hasDefault) input.value = String(schema.default);
    return { input, kind: "number",
             read: () => {
               if (input.value.trim() === "") return undefined;
               const value = Number(input.value);
               if (Number.isNaN(value)) throw new Error("not a number");
               return value;
             },
             write: (v) => { if (typeof v !== "number") return false; input.value = String(v); return true; } };
  }
  if (type === "string") {
    const input = isShortString(schema)
      ? el("input", { id, name, type: INPUT_TYPES[schema.format] || "text", maxlength: schema.maxLength, required, autocomplete: "off" })
      : el("textarea", { id, name, rows: 4, maxlength: schema.maxLength, required });
    if (hasDefault) input.value = String(schema.default);
    return { input, kind: "string", read: () => (input.value === "" ? undefined : input.value),
             write: (v) => { if (typeof v !== "string") return false; input.value = v; return true; } };
  }
  const itemType = schema.items && schema.items.type;
  if (type === "array" && ["string", "number", "integer"].includes(itemType)) {
    const input = el("textarea", { id, name, rows: 3, placeholder: "one item per line", required });
    if (Array.isArray(schema.default)) input.value = schema.default.join("\n");
    return { input, kind: "lines",
             read: () => {
               const items = input.value.split("\n").map((s) => s.trim()).filter(Boolean);
               if (!items.length) return undefined;
               if (itemType === "string") return items;
               const numbers = items.map(Number);
               if (numbers.some(Number.isNaN)) throw new Error("every line must be a number");
               return numbers;
             },
             write: (v) => {
               const fits = Array.isArray(v) && v.every((x) => (itemType === "string" ? typeof x === "string" && x.trim() === x && x && !x.includes("\n") : typeof x === "number"));
               if (fits) input.value = v.join("\n");
               return fits;
             } };
  }
  const input = el("textarea", { id, name, rows: 4, class: "code", placeholder: "JSON", required });
  if (hasDefault) input.value = JSON.stringify(schema.default, null, 2);
  return { input, kind: "json",
           read: () => {
             if (input.value.trim() === "") return undefined;
             try { return JSON.parse(input.value); } catch (error) { throw new Error(`not valid JSON (${error.message})`); }
           },
           write: (v) => { input.value = JSON.stringify(v, null, 2); return true; } };
}

/** One labelled field: {name, node, read(), write(value), fail(message), clear()}. */
export function fieldFor(name, schema, required, prefix = "arg") {
  schema = schema || {};
  const id = `${prefix}-${name}`;
  const type = typeOf(schema);
  const c = control(id, name, schema, type, required);
  const mark = required ? el("span", { class: "req", text: " *", title: "required" }) : null;
  const typeHint = type ? el("span", { class: "muted", text: ` (${type}${schema.format ? `, ${schema.format}` : ""})` }) : null;
  const label = c.kind === "boolean"
    ? el("label", { for: id, class: "check" }, c.input, el("span", { class: "name", text: name }), mark)
    : el("label", { for: id }, name, mark, typeHint);
  const help = schema.description ? el("div", { class: "help", id: `${id}-help`, text: schema.description }) : null;
  if (help) c.input.setAttribute("aria-describedby", help.id);
  const problem = el("div", { class: "field-error", id: `${id}-error`, hidden: true });
  const node = el("div", { class: "field", dataset: { field: name, kind: c.kind } }, label, c.kind === "boolean" ? null : c.input, help, problem);
  const field = {
    name, node, input: c.input, required,
    fail(message) {
      node.classList.add("invalid");
      c.input.setAttribute("aria-invalid", "true");
      c.input.setAttribute("aria-errormessage", problem.id);
      problem.textContent = message;
      problem.hidden = false;
    },
    clear() {
      node.classList.remove("invalid");
      c.input.removeAttribute("aria-invalid");
      problem.hidden = true;
    },
    read() {
      let value;
      try { value = c.read(); } catch (error) { throw { field, message: `${name}: ${error.message}` }; }
      if (value === undefined && required) throw { field, message: `${name} is required` };
      return value;
    },
    write: c.write,
  };
  c.input.addEventListener("input", () => field.clear());
  return field;
}

/** Fills `container` with the fields of an object schema; returns {read, write}. `prefix`: of the
 * fields' ids (`arg-<name>`), for a second form on the page (the tool editor's). */
export function buildForm(container, schema, prefix = "arg") {
  container.replaceChildren();
  const properties = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const fields = Object.entries(properties).map(([name, sub]) => fieldFor(name, sub, required.has(name), prefix));
  for (const field of fields) container.append(field.node);
  if (!fields.length) container.append(el("div", { class: "muted", text: "This tool takes no arguments." }));
  const byName = new Map(fields.map((f) => [f.name, f]));
  return {
    /** The arguments, or a FormError naming every empty required or unreadable field. */
    read() {
      const args = {};
      const problems = [];
      for (const field of fields) {
        field.clear();
        try {
          const value = field.read();
          if (value !== undefined) args[field.name] = value;
        } catch (problem) {
          field.fail(problem.message);
          problems.push(problem);
        }
      }
      if (problems.length) {
        problems[0].field.input.focus();
        throw new FormError(problems);
      }
      return args;
    },
    /** Puts `args` in the fields; false when some value has no field that can hold it. */
    write(args) {
      if (!args || typeof args !== "object" || Array.isArray(args)) return false;
      let fits = true;
      for (const [name, value] of Object.entries(args)) {
        const field = byName.get(name);
        if (!field || !field.write(value)) fits = false;
      }
      return fits;
    },
    field: (name) => byName.get(name),
  };
}

// The HTTP API as the page uses it: JSON calls and Server-Sent Events read from fetch().
"use strict";

export const KEY_STORAGE = "skillyard.apiKey";
// Where the app is: "" at the root, "/skillyard" when mounted there or served under that root
// path (the page is always `<base>/`), so the API's paths resolve under it too.
const BASE = new URL(".", location.href).pathname.replace(/\/$/, "");

export function headers(extra = {}) {
  const out = { ...extra };
  const key = localStorage.getItem(KEY_STORAGE);
  if (key) out.Authorization = `Bearer ${key}`;
  return out;
}

export class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code || `http_${status}`;
    this.body = body;
  }
}

export async function api(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(BASE + path, init);
  if (response.status === 204) return null;
  let data = null;
  try { data = await response.json(); } catch { /* not JSON */ }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// Reads a text/event-stream response, calling onEvent(eventObject) for every frame.
export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).replace(/^ /, "")).join("\n");
      if (!data) continue; // a comment (keep-alive)
      try { onEvent(JSON.parse(data)); } catch (error) { console.error("bad event", error, data); }
    }
  }
}

export async function stream(method, path, body, onEvent, signal) {
  const init = { method, headers: headers({ Accept: "text/event-stream" }), signal };
  if (body !== undefined) { init.body = typeof body === "string" ? body : JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  const response = await fetch(BASE + path, init);
  if (!response.ok) {
    let data = null;
    try { data = await response.json(); } catch { /* ignore */ }
    throw new ApiError(response.status, data);
  }
  await readEvents(response, onEvent);
  return response.headers.get("X-Run-Id");
}

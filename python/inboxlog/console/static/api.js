// The §14.1 API, reached by URLs relative to the app's root, so the console works
// wherever it is mounted (the root is the parent of this module's folder).

/** The app's root URL: the folder above static/. */
export const root = new URL("../", import.meta.url);

/** The URL of an API path under the root (`path` without a leading slash). */
export function apiUrl(path, params) {
  const url = new URL(`api/${path}`, root);
  for (const [key, value] of Object.entries(params ?? {})) {
    if (value !== undefined && value !== null) url.searchParams.set(key, String(value));
  }
  return url;
}

/** A session id as one path segment. */
export function segment(id) {
  return encodeURIComponent(id);
}

/** An error answered by the API: its §8 error object (or HTTP's own kind) and status. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message ?? body?.kind ?? `HTTP ${status}`);
    this.status = status;
    this.kind = body?.kind ?? "http";
    this.code = body?.code;
  }
}

async function answer(response) {
  let body = null;
  const type = response.headers.get("content-type") ?? "";
  if (type.includes("json")) body = await response.json();
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

/** GET a JSON answer. */
export async function getJson(path, params) {
  return answer(await fetch(apiUrl(path, params), { headers: { accept: "application/json" } }));
}

/** POST a JSON body; the answer's JSON. */
export async function postJson(path, body) {
  const response = await fetch(apiUrl(path), {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body),
  });
  return answer(response);
}

/** A fresh message id (randomUUID needs a secure context; an http non-loopback page is not). */
export function newMessageId() {
  if (crypto.randomUUID) return `web-${crypto.randomUUID()}`;
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `web-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

// The session list (/): pages of /api/sessions in id order, kept live by /api/follow
// (created and deleted sessions). After every (re)connection the loaded pages are read
// again, so a server restart loses nothing.

import { getJson, apiUrl, root, segment } from "./api.js";
import { dateTime, el, notify } from "./dom.js";
import { Live } from "./live.js";

const body = document.querySelector("[data-role=sessions]");
const more = document.querySelector("[data-action=more]");
const count = document.querySelector("[data-role=count]");
// Header by id, of the sessions loaded so far; `next` the after= of the page to come.
const headers = new Map();
let next = null;
let loading = null;

function row(header) {
  const link = el("a", { href: new URL(`sessions/${segment(header.id)}`, root).href }, header.id);
  const from = header.parentSession ? `fork of ${header.parentSession}` : (header.origin ?? header.cwd ?? "");
  return el(
    "tr",
    { "data-session-id": header.id },
    el("td", { class: "id" }, link),
    el("td", {}, dateTime(header.createdAt)),
    el("td", {}, header.agentPreset ?? ""),
    el("td", { class: "muted" }, from),
  );
}

function render() {
  const ids = [...headers.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  body.replaceChildren(...ids.map((id) => row(headers.get(id))));
  more.hidden = next === null;
  count.textContent = `${headers.size}${next === null ? "" : "+"} session${headers.size === 1 ? "" : "s"}`;
  document.querySelector("[data-role=empty]").hidden = headers.size !== 0;
}

async function page(after) {
  const answer = await getJson("sessions", { after });
  for (const header of answer.sessions) headers.set(header.id, header);
  next = answer.next;
}

// Reads again every page loaded so far (after a reconnection the list may have changed).
async function reload() {
  const pages = Math.max(1, Math.ceil(headers.size / 100));
  const seen = new Map();
  let after = null;
  for (let i = 0; i < pages; i++) {
    const answer = await getJson("sessions", { after });
    for (const header of answer.sessions) seen.set(header.id, header);
    after = answer.next;
    if (after === null) break;
  }
  headers.clear();
  for (const [id, header] of seen) headers.set(id, header);
  next = after;
  render();
}

function onChange(change) {
  if (change.op === "created") {
    // A session past the loaded pages comes with its page.
    if (next !== null && change.id > [...headers.keys()].reduce((a, b) => (a > b ? a : b), "")) return;
    headers.set(change.id, change.header ?? { id: change.id, createdAt: Date.now() });
  } else if (change.op === "deleted") {
    headers.delete(change.id);
  }
  render();
}

// Reads the list again after the one in flight; a failure says so and tries again.
function sync() {
  loading = (loading ?? Promise.resolve()).then(reload).then(
    () => notify(""),
    (error) => {
      notify(`Could not list the sessions: ${error.message}; trying again.`, "error");
      setTimeout(sync, 1000);
    },
  );
}

const live = new Live({
  url: () => apiUrl("follow"),
  onEvent: onChange,
  onOpen: sync,
  onState: (state) => {
    const badge = document.querySelector("[data-role=stream]");
    badge.dataset.state = state;
    badge.textContent = state === "live" ? "Live" : state === "reconnecting" ? "Reconnecting…" : "Closed";
  },
});

more.addEventListener("click", async () => {
  if (next === null) return;
  more.disabled = true;
  try {
    await page(next);
    render();
  } catch (error) {
    notify(`Could not list the sessions: ${error.message}`, "error");
  } finally {
    more.disabled = false;
  }
});

live.open(null);

// The session's events as a timeline, latest first: turn and step boundaries as
// separators, the conversation (§15: messages, tool calls, their results) as text
// (conversation.js), every other event collapsed with its JSON. Each row carries
// data-seq and a data-action="inbox-at" control.

import { conversation } from "./conversation.js";
import { clock, el } from "./dom.js";

function describe(event) {
  const d = event.data ?? {};
  switch (event.type) {
    case "turn/start":
      return `Turn ${d.turn} started`;
    case "turn/end":
      return `Turn ${d.turn} ended: ${d.reason?.kind ?? JSON.stringify(d.reason)}`;
    case "step/start":
      return `Step ${d.step} of turn ${d.turn}`;
    case "step/end":
      return `Step ${d.step} of turn ${d.turn} ended`;
    default:
      return null;
  }
}

function spliceSummary(record) {
  const parts = [];
  const removal = record.outcome === "canceled" || record.outcome === "moved" ? record.outcome : "took";
  if (record.removedCount) parts.push(`${removal} ${record.removedCount}`);
  const inserted = record.inserted ?? [];
  if (inserted.length) parts.push(`added ${inserted.map((m) => m.id).join(", ")}`);
  return `${record.target}: ${parts.join("; ") || "no change"}`;
}

function preview(data) {
  const text = JSON.stringify(data) ?? "null";
  return text.length > 96 ? `${text.slice(0, 95)}…` : text;
}

/** One event's row. */
export function row(event) {
  const head = el(
    "div",
    { class: "ev-head" },
    el("span", { class: "ev-seq" }, `#${event.seq}`),
    el("span", { class: "ev-type" }, event.type),
    el("time", { class: "ev-time", datetime: new Date(event.time).toISOString() }, clock(event.time)),
    el("button", { type: "button", class: "link", "data-action": "inbox-at", title: `Show the inbox as of #${event.seq}` }, "inbox here"),
  );
  const boundary = describe(event);
  const said = boundary === null ? conversation(event) : null;
  let kind;
  let body;
  if (boundary !== null) {
    kind = event.type.startsWith("turn/") ? "turn" : "step";
    body = el("div", { class: "ev-boundary" }, boundary);
  } else if (said !== null) {
    ({ kind, body } = said);
  } else {
    kind = "host";
    const summary = event.type === "agent/inbox/spliced" ? spliceSummary(event.data ?? {}) : preview(event.data);
    body = el(
      "details",
      { class: "ev-json" },
      el("summary", {}, summary),
      el("pre", {}, JSON.stringify(event, null, 2)),
    );
  }
  return el("li", { class: `ev ev-${kind}`, "data-seq": event.seq, "data-kind": kind }, head, body);
}

/**
 * The timeline list: rows by seq, newest at the top, each seq shown once. Live events
 * grow it at the top; once it holds a page more than it should (`page` rows, plus the
 * pages asked for with "more"), the oldest rows go, so a busy session's page stays
 * bounded (they come back with "more").
 */
export class Timeline {
  constructor(list, page) {
    this.list = list;
    this.page = page;
    this.keep = page;
    this.newest = -1;
    this.oldest = null;
  }

  /** Adds events newer than any shown (others are already on the page). */
  prepend(events) {
    const fresh = events.filter((e) => e.seq > this.newest);
    if (!fresh.length) return;
    const rows = document.createDocumentFragment();
    for (let i = fresh.length - 1; i >= 0; i--) rows.append(row(fresh[i]));
    this.list.prepend(rows);
    this.newest = fresh[fresh.length - 1].seq;
    if (this.oldest === null) this.oldest = fresh[0].seq;
    this.trim();
  }

  trim() {
    const rows = this.list.children;
    if (rows.length <= this.keep + this.page) return;
    while (rows.length > this.keep) this.list.lastElementChild.remove();
    this.oldest = Number(this.list.lastElementChild.dataset.seq);
  }

  /** Adds an older page (ascending events, all before the oldest shown) at the bottom. */
  appendOlder(events) {
    const older = events.filter((e) => this.oldest === null || e.seq < this.oldest);
    if (!older.length) return;
    const rows = document.createDocumentFragment();
    for (let i = older.length - 1; i >= 0; i--) rows.append(row(older[i]));
    this.list.append(rows);
    this.keep = Math.max(this.keep, this.list.children.length);
    this.oldest = older[0].seq;
    if (this.newest < older[older.length - 1].seq) this.newest = older[older.length - 1].seq;
  }

  /** Marks the row of `seq` as the one whose inbox is shown (null: none). */
  pick(seq) {
    for (const picked of this.list.querySelectorAll(".ev.picked")) picked.classList.remove("picked");
    if (seq !== null) this.list.querySelector(`[data-seq="${seq}"]`)?.classList.add("picked");
  }
}

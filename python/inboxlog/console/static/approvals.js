// The pending approvals (SPEC §17.3): a fold of the session's approval events from the
// state the API gives as of a seq, and the panel that shows it, one item per pending
// approval (data-approval-id) with its tool name, reason and arguments as text and
// data-action="allow" / "reject", plus the parked turn (waiting for decisions or ready).

import { el } from "./dom.js";

export class Approvals {
  /** From the session JSON: `approvals` and `parked` as of `lastSeq`. */
  constructor(summary) {
    this.seq = summary.lastSeq ?? -1;
    this.pending = Array.isArray(summary.approvals) ? [...summary.approvals] : [];
    this.parked = summary.parked ?? null;
  }

  /**
   * Folds the event that follows the fold's seq (an older one is skipped): asked adds,
   * decided removes, parked and resumed set and clear the parked turn, a turn's end
   * clears both. True when what the panel shows changed.
   */
  apply(event) {
    if (event.seq <= this.seq) return false;
    this.seq = event.seq;
    const data = event.data ?? {};
    switch (event.type) {
      case "approval/asked":
        this.pending.push(data);
        break;
      case "approval/decided":
        this.pending = this.pending.filter((approval) => approval.id !== data.id);
        break;
      case "turn/parked":
        this.parked = { turn: data.turn, approvals: Array.isArray(data.approvals) ? data.approvals : [] };
        break;
      case "turn/resumed":
        this.parked = null;
        break;
      case "turn/end":
        this.parked = null;
        this.pending = [];
        break;
      default:
        return false;
    }
    if (this.parked) {
      const waiting = new Set(this.pending.map((approval) => approval.id));
      this.parked = { ...this.parked, ready: !this.parked.approvals.some((id) => waiting.has(id)) };
    }
    return true;
  }
}

/** The model's arguments as text: a string as written, anything else as JSON. */
function argumentsText(value) {
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2) ?? "";
}

function item(approval, disabled, title) {
  const button = (action, label, kind) =>
    el("button", { type: "button", class: `small ${kind}`, "data-action": action, disabled, title }, label);
  return el(
    "li",
    { class: "approval", "data-approval-id": approval.id },
    el(
      "div",
      { class: "msg-head" },
      el("code", { class: "approval-tool", "data-field": "tool" }, String(approval.toolName ?? "")),
      typeof approval.callId === "string" ? el("span", { class: "msg-meta" }, approval.callId) : null,
      el("span", { class: "msg-actions" }, button("allow", "Allow once", "primary"), button("reject", "Reject", "danger")),
    ),
    approval.reason !== undefined
      ? el("div", { class: "approval-reason", "data-field": "reason" }, typeof approval.reason === "string" ? approval.reason : JSON.stringify(approval.reason))
      : null,
    approval.arguments !== undefined ? el("pre", { class: "ev-args", "data-field": "arguments" }, argumentsText(approval.arguments)) : null,
  );
}

/**
 * Renders the panel: hidden while nothing is pending or parked. `sent` holds the ids
 * whose decision is on its way (their buttons disabled); `readOnly` disables them all.
 */
export function renderApprovals(root, approvals, sent, readOnly) {
  const { pending, parked } = approvals;
  root.hidden = pending.length === 0 && !parked;
  const note = readOnly ? "this console is read-only" : null;
  root.querySelector("[data-role=approvals]").replaceChildren(
    ...pending.map((approval) => item(approval, readOnly || sent.has(approval.id), note)),
  );
  root.querySelector("[data-count=approvals]").textContent = String(pending.length);
  const line = root.querySelector("[data-role=parked]");
  line.hidden = !parked;
  if (parked) {
    const waiting = parked.approvals.filter((id) => pending.some((approval) => approval.id === id)).length;
    line.dataset.state = parked.ready ? "ready" : "waiting";
    line.textContent = parked.ready
      ? `Turn ${parked.turn} is parked and ready: every decision is in, the run resumes when its worker takes it up.`
      : `Turn ${parked.turn} is parked, waiting for ${waiting} decision${waiting === 1 ? "" : "s"}.`;
  } else {
    delete line.dataset.state;
    line.textContent = "";
  }
}

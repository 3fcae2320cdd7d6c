// A session's page (/sessions/{id}): the timeline, the two queues kept live from a
// baseline plus the followed events (§5.2), the composer, remove/replace and move
// ("send now", §17.5), the inbox as of any event, and the pending approvals with allow
// and reject (§17.3). One live stream for the page (live.js).

import { ApiError, apiUrl, getJson, newMessageId, postJson, segment } from "./api.js";
import { Approvals, renderApprovals } from "./approvals.js";
import { dateTime, el, notify } from "./dom.js";
import { Live } from "./live.js";
import { Projection, ProjectionError } from "./projection.js";
import { editor, renderQueues } from "./queues.js";
import { Timeline } from "./timeline.js";

const PAGE = 500;
const id = decodeURIComponent(location.pathname.split("/").pop());
const base = `sessions/${segment(id)}`;
const $ = (selector) => document.querySelector(selector);

const timeline = new Timeline($("[data-role=timeline]"), PAGE);
const queues = $("[data-role=queues]");
let projection = null;
const approvalsPanel = $("[data-role=approvals-panel]");
// The pending approvals and the parked turn, and the ids whose decision is on its way.
let approvals = null;
const sent = new Set();
// The console refuses mutations (the session JSON says so): its controls are disabled.
let readOnly = false;
// The seq whose past inbox is shown (null: the live inbox).
let pastSeq = null;
// The moves on their way: message id -> the list it was in when its move was sent. One
// goes when the message is pending in the other list (moved) or its move is rejected
// (a message no longer pending when the move came: removed, claimed).
const moving = new Map();
// The open replace editor: {id, node}, kept across re-renders of the queues.
let editing = null;
// True while a new baseline is being fetched (the stream is reopened after it).
let rebaselining = false;

document.title = `${id} · inboxlog`;
$("[data-role=session-id]").textContent = id;

function state(text) {
  const badge = $("[data-role=stream]");
  badge.dataset.state = text;
  badge.textContent = text === "live" ? "Live" : text === "reconnecting" ? "Reconnecting…" : "Closed";
}

function showHeader(summary) {
  readOnly = summary.readOnly === true;
  $("[data-role=created]").textContent = dateTime(summary.header.createdAt);
  $("[data-role=turn]").textContent = summary.openTurn === null ? "idle" : `turn ${summary.openTurn} open`;
  $("[data-role=last-seq]").textContent = summary.lastSeq === null ? "no events" : `${summary.lastSeq + 1} events`;
}

function renderLive() {
  if (pastSeq !== null || projection === null) return;
  for (const [messageId, from] of moving) {
    const now = projection.where.get(messageId);
    if (now !== undefined && now !== from) moving.delete(messageId);
  }
  renderQueues(queues, projection.lists, { readOnly, moving });
  if (editing) {
    const node = queues.querySelector(`[data-message-id="${CSS.escape(editing.id)}"]`);
    if (node) node.append(editing.node);
    else editing = null;
  }
}

function renderDecisions() {
  if (approvals === null) return;
  for (const approvalId of sent) {
    if (!approvals.pending.some((approval) => approval.id === approvalId)) sent.delete(approvalId);
  }
  renderApprovals(approvalsPanel, approvals, sent, readOnly);
  if (approvals.parked) $("[data-role=turn]").textContent = `turn ${approvals.parked.turn} parked`;
}

function messageOf(node) {
  const itemNode = node.closest("[data-message-id]");
  const messageId = itemNode?.dataset.messageId;
  if (!projection || messageId === undefined) return null;
  const target = projection.where.get(messageId);
  return target ? projection.lists[target].find((m) => m.id === messageId) : null;
}

// A gap or a failed check: the queues start again from a new baseline, and the stream
// again from what both the timeline and that baseline have (the timeline skips what it
// shows already, the projection what its baseline holds).
async function rebaseline(why) {
  if (rebaselining) return;
  rebaselining = true;
  console.warn(`inboxlog: new baseline (${why})`);
  try {
    const summary = await getJson(base);
    showHeader(summary);
    projection = new Projection(summary.baseline);
    approvals = new Approvals(summary);
    renderLive();
    renderDecisions();
    rebaselining = false;
    live.open(Math.min(timeline.newest, projection.seq) + 1);
  } catch (error) {
    rebaselining = false;
    notify(`Could not load the inbox: ${failure(error)}`, "error");
    setTimeout(() => rebaseline("retry"), 1000);
  }
}

function onEvent(event) {
  if (rebaselining) return;
  // A seq skipped by the stream: start again from what the page has (the timeline
  // would otherwise show a hole, the projection throws on it anyway).
  if (timeline.newest >= 0 && event.seq > timeline.newest + 1) {
    rebaseline(`gap: seq ${event.seq} after ${timeline.newest}`);
    return;
  }
  timeline.prepend([event]);
  if (event.type === "turn/start") $("[data-role=turn]").textContent = `turn ${event.data.turn} open`;
  if (event.type === "turn/end") $("[data-role=turn]").textContent = "idle";
  if (event.type === "turn/resumed") $("[data-role=turn]").textContent = `turn ${event.data.turn} open`;
  if (approvals.apply(event)) renderDecisions();
  if (event.type === "agent/inbox/rejected") rejected(event.data ?? {});
  $("[data-role=last-seq]").textContent = `${timeline.newest + 1} events`;
  $("[data-action=more]").hidden = timeline.oldest === null || timeline.oldest === 0;
  try {
    if (projection.apply(event)) renderLive();
  } catch (error) {
    if (!(error instanceof ProjectionError)) throw error;
    rebaseline(error.message);
  }
}

const live = new Live({
  url: (since) => apiUrl(`${base}/follow`, { since }),
  onEvent,
  onState: state,
});

async function loadOlder() {
  const more = $("[data-action=more]");
  if (timeline.oldest === null || timeline.oldest === 0) return;
  more.disabled = true;
  try {
    const since = Math.max(0, timeline.oldest - PAGE);
    const page = await getJson(`${base}/events`, { since, limit: timeline.oldest - since });
    timeline.appendOlder(page.events);
  } catch (error) {
    notify(`Could not load older events: ${error.message}`, "error");
  } finally {
    more.disabled = false;
    more.hidden = timeline.oldest === null || timeline.oldest === 0;
  }
}

async function showPast(seq) {
  try {
    const baseline = await getJson(`${base}/baseline`, { at: seq });
    pastSeq = seq;
    renderQueues(queues, { "next-turn": baseline.next_turn, "next-step": baseline.next_step }, null);
    timeline.pick(seq);
    queues.dataset.mode = "past";
    $("[data-role=inbox-mode]").textContent = `As of #${seq}`;
    $("[data-action=live]").hidden = false;
  } catch (error) {
    notify(`Could not load the inbox at #${seq}: ${error.message}`, "error");
  }
}

function showLive() {
  pastSeq = null;
  timeline.pick(null);
  queues.dataset.mode = "live";
  $("[data-role=inbox-mode]").textContent = "Live";
  $("[data-action=live]").hidden = true;
  renderLive();
}

function failure(error) {
  if (error instanceof ApiError) return `${error.message} (${error.status})`;
  return error.message;
}

async function post() {
  const button = $("[data-action=post]");
  const field = $("[data-role=composer] [data-field=content]");
  const target = $("[data-role=composer] [data-target]").value;
  const content = field.value;
  if (button.disabled || content.trim() === "") return;
  button.disabled = true;
  try {
    const message = { id: newMessageId(), role: "user", content };
    const answer = await postJson(`${base}/inbox`, { target, message });
    field.value = "";
    notify(`Posted ${message.id} to ${target} (post ${answer.post}); it is pending once the session takes it in.`);
  } catch (error) {
    notify(`Not posted: ${failure(error)}`, "error");
  } finally {
    button.disabled = false;
  }
}

async function edit(path, body, done) {
  try {
    const answer = await postJson(`${base}/inbox/${path}`, body);
    notify(`${done} (post ${answer.post}).`);
    return true;
  } catch (error) {
    notify(`Not sent: ${failure(error)}`, "error");
    return false;
  }
}

// "Send now" (or back to the next turn): the move is posted; the queues change when the
// session's owner applies it and its two splices come down the stream.
async function move(control) {
  const message = messageOf(control);
  const target = control.dataset.target;
  if (!message || moving.has(message.id)) return;
  moving.set(message.id, projection.where.get(message.id));
  renderLive();
  try {
    const answer = await postJson(`${base}/inbox/move`, { id: message.id, target });
    notify(`Move of ${message.id} to ${target} sent (post ${answer.post}).`);
  } catch (error) {
    moving.delete(message.id);
    renderLive();
    notify(`Not sent: ${failure(error)}`, "error");
  }
}

// The owner refused a move (the message was no longer pending): said, and its button back.
function rejected(data) {
  const messageId = data.move?.id;
  if (typeof messageId !== "string" || !moving.has(messageId)) return;
  moving.delete(messageId);
  renderLive();
  const reason = typeof data.reason?.message === "string" ? data.reason.message : JSON.stringify(data.reason);
  notify(`Move of ${messageId} rejected: ${reason}`, "error");
}

async function decide(control, outcome) {
  const approvalId = control.closest("[data-approval-id]")?.dataset.approvalId;
  if (approvalId === undefined || sent.has(approvalId)) return;
  sent.add(approvalId);
  renderDecisions();
  const said = outcome === "allowed-once" ? "Allowed" : "Rejected";
  try {
    const answer = await postJson(`${base}/approvals`, { id: approvalId, outcome });
    notify(`${said} ${approvalId} (post ${answer.post}); it is decided once the session takes it in.`);
  } catch (error) {
    sent.delete(approvalId);
    renderDecisions();
    notify(`Not sent: ${failure(error)}`, "error");
  }
}

document.addEventListener("click", (click) => {
  const control = click.target.closest("[data-action]");
  if (!control) return;
  switch (control.dataset.action) {
    case "post":
      post();
      break;
    case "more":
      loadOlder();
      break;
    case "live":
      showLive();
      break;
    case "allow":
      decide(control, "allowed-once");
      break;
    case "reject":
      decide(control, "rejected");
      break;
    case "inbox-at":
      showPast(Number(control.closest("[data-seq]").dataset.seq));
      break;
    case "remove": {
      const message = messageOf(control);
      if (!message) break;
      control.disabled = true;
      edit("remove", { id: message.id }, `Removal of ${message.id} sent`);
      break;
    }
    case "move":
      move(control);
      break;
    case "replace": {
      const message = messageOf(control);
      if (!message || editing?.id === message.id) break;
      editing?.node.remove();
      const node = editor(
        message,
        (text) => edit("replace", { id: message.id, message: { ...message, content: text } }, `Replacement of ${message.id} sent`),
        () => {
          if (editing?.node === node) editing = null;
        },
      );
      editing = { id: message.id, node };
      control.closest("[data-message-id]").append(node);
      node.querySelector("textarea").focus();
      break;
    }
  }
});

$("[data-role=composer]").addEventListener("submit", (submit) => submit.preventDefault());
$("[data-role=composer] [data-field=content]").addEventListener("keydown", (key) => {
  if (key.key === "Enter" && (key.ctrlKey || key.metaKey)) {
    key.preventDefault();
    post();
  }
});

// The first page: the summary (header and baseline), then the newest events up to it,
// then the stream from there. A failure other than "no such session" tries again.
async function start() {
  let summary;
  let page = { events: [] };
  try {
    summary = await getJson(base);
    const last = summary.lastSeq;
    if (last !== null) {
      const since = Math.max(0, last - PAGE + 1);
      page = await getJson(`${base}/events`, { since, limit: last - since + 1 });
    }
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      notify(`No session ${id}.`, "error");
    } else {
      notify(`Could not load: ${failure(error)}; trying again.`, "error");
      setTimeout(start, 1000);
    }
    return;
  }
  notify("");
  showHeader(summary);
  projection = new Projection(summary.baseline);
  approvals = new Approvals(summary);
  renderLive();
  renderDecisions();
  timeline.prepend(page.events);
  $("[data-action=more]").hidden = timeline.oldest === null || timeline.oldest === 0;
  performance.mark("inboxlog:first-render");
  document.body.dataset.ready = "true";
  live.open(Math.min(timeline.newest, projection.seq) + 1);
}

start();

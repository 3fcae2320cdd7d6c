// The conversation of SPEC §15 as a timeline row's body, built from text only (dom.js):
// user and assistant messages block by block (text, reasoning marked as such, tool
// calls with their name and the model's raw arguments), tool calls and their results
// (an error marked, with its code). A block of a type not known here is skipped, as
// §15.1 asks of readers. An event of an older shape (its text at the top of its data,
// as logs from before §15 hold) shows that text, as it always did.

import { el, textOf } from "./dom.js";

/**
 * `{kind, body}` for a conversation event's row (`kind` its `data-kind`: user,
 * assistant or tool), or null when the event is not one or its shape says nothing
 * this page can show as conversation (its row then collapses to its JSON).
 */
export function conversation(event) {
  const data = event.data;
  switch (event.type) {
    case "user/message":
      return { kind: "user", body: userMessage(data) };
    case "assistant/message":
      return { kind: "assistant", body: assistantMessage(data) };
    case "tool/call":
      return isObject(data) && typeof data.name === "string" ? { kind: "tool", body: toolCall(data) } : null;
    case "tool/result":
      return { kind: "tool", body: toolResult(data) };
    default:
      return null;
  }
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function body(...children) {
  return el("div", { class: "ev-body" }, ...children);
}

/** Text as the page shows it, a block of its own (pre-wrapped, never markup). */
function text(value) {
  return el("div", { class: "ev-text" }, value);
}

function label(value) {
  return el("span", { class: "ev-label" }, value);
}

/** The model's arguments: its raw JSON text as written, anything else as JSON. */
function argumentsText(value) {
  if (typeof value === "string") return value;
  return JSON.stringify(value) ?? "";
}

// user/message: an inbox message or a host's user-role object; its content a string or
// blocks. Anything else shows as it did before §15 (its `content` or `text`, else JSON).
function userMessage(data) {
  if (isObject(data) && Array.isArray(data.content)) return body(...orNoContent(blocks(data.content)));
  return body(text(textOf(data)));
}

// assistant/message: `data.message.content`, then what produced it (source, usage).
function assistantMessage(data) {
  const message = isObject(data) ? data.message : undefined;
  if (!isObject(message)) return body(text(textOf(data)));
  return body(...orNoContent(contentOf(message.content)), facts(data, message));
}

/** One muted line: the model that wrote the message, its token usage, an interruption. */
function facts(data, message) {
  const parts = [];
  const source = isObject(message.source) ? message.source : {};
  const model = [source.provider, source.model].filter((part) => typeof part === "string" && part);
  if (model.length) parts.push(model.join("/"));
  const usage = isObject(data.usage) ? data.usage : {};
  const tokens = [
    ["inputTokens", "in"],
    ["outputTokens", "out"],
    ["reasoningTokens", "reasoning"],
    ["cacheReadTokens", "cache read"],
    ["cacheWriteTokens", "cache write"],
  ]
    .filter(([key]) => typeof usage[key] === "number")
    .map(([key, name]) => `${usage[key]} ${name}`);
  if (tokens.length) parts.push(`tokens: ${tokens.join(", ")}`);
  if (data.interrupted === true) parts.push("interrupted");
  return parts.length ? el("div", { class: "ev-meta" }, parts.join(" · ")) : null;
}

// tool/call: written when the call is dispatched, before its result.
function toolCall(data) {
  return body(call(data.name, data.callId, data.arguments ?? data.args));
}

function call(name, id, args) {
  return el(
    "div",
    { class: "ev-call", "data-block": "tool-call" },
    el(
      "div",
      { class: "ev-call-head" },
      label("tool call"),
      el("code", { class: "ev-tool-name" }, String(name)),
      typeof id === "string" ? el("span", { class: "ev-call-id" }, id) : null,
    ),
    el("pre", { class: "ev-args" }, argumentsText(args)),
  );
}

// tool/result: the tool-result block's content; an error (`isError` on the block, or
// the event's `error`) marked, with the error's code and name when the event has them.
function toolResult(data) {
  const message = isObject(data) ? data.message : undefined;
  if (!isObject(message)) return body(text(textOf(data)));
  const error = isObject(data.error) ? data.error : data.error !== undefined ? {} : null;
  const shown = orNoContent(contentOf(message.content, error));
  const marked = shown.some((node) => node.dataset.error !== undefined);
  return body(error !== null && !marked ? failure(error) : null, ...shown);
}

/** The error marker: "error", then the error's code and name when known. */
function failure(error) {
  const code = typeof error?.code === "string" ? error.code : "";
  const name = typeof error?.name === "string" ? error.name : "";
  const said = ["error", code, name && `(${name})`].filter(Boolean).join(" ");
  return el("span", { class: "ev-error", "data-error": code }, said);
}

/** A message's or a tool result's content: a string as text, a list as its blocks. */
function contentOf(content, error = null) {
  if (typeof content === "string") return [text(content)];
  return Array.isArray(content) ? blocks(content, error) : [];
}

/** The elements shown, or a muted "no content" when there are none. */
function orNoContent(shown) {
  return shown.length ? shown : [el("div", { class: "ev-meta" }, "no content")];
}

/**
 * The elements of a content list, in order: the blocks of §15.1, each of its own kind;
 * a plain string as text; anything else skipped. `error` is the tool/result's error
 * (null when it has none), marked on its tool-result block.
 */
function blocks(content, error = null) {
  const out = [];
  for (const part of content) {
    if (typeof part === "string") {
      out.push(text(part));
      continue;
    }
    if (!isObject(part)) continue;
    switch (part.type) {
      case "text":
        if (typeof part.text === "string") out.push(text(part.text));
        break;
      case "reasoning":
        if (typeof part.text === "string") {
          out.push(el("div", { class: "ev-reasoning", "data-block": "reasoning" }, label("reasoning"), text(part.text)));
        }
        break;
      case "tool-call":
        out.push(call(part.name ?? "", part.id, part.arguments));
        break;
      case "tool-result":
        out.push(result(part, error));
        break;
      case "image":
        out.push(el("div", { class: "ev-meta", "data-block": "image" }, "[image]"));
        break;
      default:
        break;
    }
  }
  return out;
}

function result(block, error) {
  const failed = block.isError === true || error !== null;
  return el(
    "div",
    { class: "ev-result", "data-block": "tool-result", "data-error": failed ? (error?.code ?? "") : null },
    el(
      "div",
      { class: "ev-call-head" },
      label("result"),
      typeof block.toolCallId === "string" ? el("span", { class: "ev-call-id" }, block.toolCallId) : null,
      failed ? failure(error) : null,
    ),
    ...orNoContent(contentOf(block.content)),
  );
}

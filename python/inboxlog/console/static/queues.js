// The two queue lists (data-queue="next-turn"|"next-step"), one item per pending message
// (data-message-id) with remove and replace controls; replace opens an editor whose text
// field is data-field="content", saved by data-action="save".

import { el, textOf } from "./dom.js";
import { TARGETS } from "./projection.js";

function item(message, editable) {
  const meta = [message.role, message.source].filter((v) => typeof v === "string").join(" · ");
  return el(
    "li",
    { class: "msg", "data-message-id": message.id },
    el(
      "div",
      { class: "msg-head" },
      el("code", { class: "msg-id" }, message.id),
      meta ? el("span", { class: "msg-meta" }, meta) : null,
      editable
        ? el(
            "span",
            { class: "msg-actions" },
            el("button", { type: "button", class: "small", "data-action": "replace" }, "Replace"),
            el("button", { type: "button", class: "small danger", "data-action": "remove" }, "Remove"),
          )
        : null,
    ),
    el("div", { class: "msg-text" }, textOf(message)),
  );
}

/** Renders both lists; `editable` false for a past inbox (no controls). */
export function renderQueues(root, lists, editable) {
  for (const target of TARGETS) {
    const list = root.querySelector(`[data-queue="${target}"]`);
    const messages = lists[target];
    list.replaceChildren(...messages.map((m) => item(m, editable)));
    list.dataset.count = String(messages.length);
    const count = root.querySelector(`[data-count="${target}"]`);
    if (count) count.textContent = String(messages.length);
  }
}

/**
 * The replace editor for a message, to put under its item; `onSave(text)` when saved,
 * `onClose()` when saved or canceled. The page keeps the node across re-renders.
 */
export function editor(message, onSave, onClose) {
  const field = el("textarea", { "data-field": "content", rows: "3", "aria-label": `New content of ${message.id}` });
  field.value = textOf(message);
  const save = el("button", { type: "button", class: "primary small", "data-action": "save" }, "Save");
  const cancel = el("button", { type: "button", class: "small", "data-action": "cancel" }, "Cancel");
  const node = el("div", { class: "editor" }, field, el("div", { class: "editor-actions" }, cancel, save));
  save.addEventListener("click", async () => {
    if (save.disabled) return;
    save.disabled = true;
    try {
      if (await onSave(field.value)) {
        node.remove();
        onClose();
      }
    } finally {
      save.disabled = false;
    }
  });
  cancel.addEventListener("click", () => {
    node.remove();
    onClose();
  });
  return node;
}
